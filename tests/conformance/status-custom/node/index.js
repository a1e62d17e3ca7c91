exports.handler = async () => ({
  statusCode: 418,
  headers: { 'X-Teapot': 'yes', 'Content-Type': 'text/plain' },
  body: 'short and stout',
});
