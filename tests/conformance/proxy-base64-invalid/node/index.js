exports.handler = async () => ({ statusCode: 200, body: '%%% not base64 %%%', isBase64Encoded: true });
