exports.handler = async () => ({ statusCode: 200, body: 'plain text body' });
