exports.handler = async () => ({
  statusCode: 200,
  headers: { 'X-CamelCase': 'a', 'content-TYPE': 'text/plain' },
  body: 'x',
});
