module.exports.handler = async function (event, context) {
  return {
    tokenUndefined: context.token === undefined,
    requestId: context.requestId,
    functionFolderId: context.functionFolderId,
    functionName: context.functionName,
    payload: context.getPayload(),
  };
};
