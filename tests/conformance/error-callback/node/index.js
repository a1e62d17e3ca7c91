exports.handler = (event, context, callback) => {
  setTimeout(() => callback(new TypeError('bad input')), 5);
};
