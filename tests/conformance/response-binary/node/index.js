exports.handler = async () => ({
  statusCode: 200,
  headers: { 'Content-Type': 'application/octet-stream' },
  body: Buffer.from([...Array(256).keys()]).toString('base64'),
  isBase64Encoded: true,
});
