let timer = null;

exports.handler = (event, context, callback) => {
  context.callbackWaitsForEmptyEventLoop = false;
  if (!timer) timer = setInterval(() => {}, 1000); // like a database pool's keep-alive
  callback(null, 'answered without waiting');
};
