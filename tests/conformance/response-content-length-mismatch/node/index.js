exports.handler = async () => ({ statusCode: 200, headers: { 'Content-Length': '999' }, body: 'short' });
