exports.handler = async () => ({
  statusCode: 200,
  headers: { 'X-Int': 5, 'X-Float': 2.5, 'X-Bool': true, 'X-Str': 's' },
  multiValueHeaders: { 'X-Multi': [1, false, 'x'] },
  body: 'ok',
});
