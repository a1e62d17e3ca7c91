exports.handler = async () => ({ statusCode: 'abc', body: 'x' });
