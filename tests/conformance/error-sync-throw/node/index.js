exports.handler = (event, context) => {
  throw new Error('boom');
};
