exports.handler = async (event) => ({ statusCode: 404, event, isHttpEvent: 'httpMethod' in event });
