exports.handler = async () => ({ statusCode: 1000, body: 'x' });
