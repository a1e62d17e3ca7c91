exports.handler = (event, context, callback) => {
  setTimeout(() => console.log('timer fired after the callback'), 200);
  callback(null, 'answered');
};
