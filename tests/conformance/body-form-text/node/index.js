exports.handler = async (event) => ({ body: event.body, isBase64Encoded: event.isBase64Encoded });
