exports.handler = async () => ({ status: 404, body: 'x' });
