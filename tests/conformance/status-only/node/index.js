exports.handler = async () => ({ statusCode: 202 });
