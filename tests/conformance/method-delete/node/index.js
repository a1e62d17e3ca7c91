exports.handler = async (event) => ({
  method: event.httpMethod,
  path: event.path,
  proxy: event.pathParameters.proxy,
});
