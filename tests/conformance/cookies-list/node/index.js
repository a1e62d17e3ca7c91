exports.handler = async () => ({
  statusCode: 200,
  multiValueHeaders: { 'Set-Cookie': ['a=1'] },
  cookies: ['c=3; Path=/', 'd=4; Secure; HttpOnly'],
  body: 'ok',
});
