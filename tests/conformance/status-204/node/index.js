exports.handler = async () => ({ statusCode: 204, body: 'ignored' });
