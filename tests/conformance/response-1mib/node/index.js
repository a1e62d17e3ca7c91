exports.handler = async () => ({
  statusCode: 200,
  headers: { 'Content-Type': 'text/plain' },
  body: '0123456789abcdef'.repeat(65536),
});
