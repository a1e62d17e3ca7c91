exports.handler = async () => ({ statusCode: '201', body: 'created' });
