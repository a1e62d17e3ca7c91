const crypto = require('crypto');

exports.handler = async (event) => ({
  length: event.body.length,
  isBase64Encoded: event.isBase64Encoded,
  sha256: crypto.createHash('sha256').update(event.body, 'utf8').digest('hex'),
});
