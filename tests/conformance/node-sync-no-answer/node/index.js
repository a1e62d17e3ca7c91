exports.handler = function (event, context) {
  setTimeout(() => console.log('timer ran'), 50);
};
