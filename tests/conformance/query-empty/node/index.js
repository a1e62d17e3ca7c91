exports.handler = async (event) => ({
  q: event.queryStringParameters,
  mq: event.multiValueQueryStringParameters,
});
