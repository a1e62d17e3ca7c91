exports.handler = async (event) => ({
  isString: typeof event.body === 'string',
  isBase64Encoded: event.isBase64Encoded,
  parsed: JSON.parse(event.body),
});
