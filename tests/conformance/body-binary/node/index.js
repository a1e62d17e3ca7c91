exports.handler = async (event) => {
  const raw = Buffer.from(event.body, 'base64');
  return { body: event.body, isBase64Encoded: event.isBase64Encoded, hex: raw.toString('hex'), length: raw.length };
};
