exports.handler = async () => ({ statusCode: 200, body: { k: [1, 2] } });
