exports.handler = function (event, context) {
  context.succeed({ via: 'succeed' });
};
