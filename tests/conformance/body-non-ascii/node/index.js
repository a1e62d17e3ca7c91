exports.handler = async (event) => {
  const body = event.body;
  if (event.isBase64Encoded) throw new Error('expected text');
  return {
    statusCode: 200,
    headers: { 'Content-Type': 'text/plain; charset=utf-8' },
    body: `${[...body].length}|${Buffer.byteLength(body, 'utf8')}|${body}`,
  };
};
