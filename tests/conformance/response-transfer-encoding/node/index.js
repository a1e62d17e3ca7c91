exports.handler = async () => ({ statusCode: 200, headers: { 'Transfer-Encoding': 'chunked' }, body: 'short' });
