exports.handler = async (event) => ({
  path: event.path,
  rcPath: event.requestContext.path,
  pathParameters: event.pathParameters,
  method: event.httpMethod,
});
