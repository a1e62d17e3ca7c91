module.exports.handler = async (event, context) => ({ token: context.token, payload: context.getPayload() });
