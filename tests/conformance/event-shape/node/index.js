exports.handler = async (event, context) => {
  const rc = event.requestContext;
  const epoch = rc.requestTimeEpoch;
  return {
    resource: event.resource,
    path: event.path,
    httpMethod: event.httpMethod,
    pathParameters: event.pathParameters,
    stageVariables: event.stageVariables,
    rc: {
      httpMethod: rc.httpMethod,
      path: rc.path,
      resourcePath: rc.resourcePath,
      stage: rc.stage,
      protocol: rc.protocol,
      requestId: rc.requestId,
      requestIdIsContextId: rc.requestId === context.awsRequestId,
      requestTimeIsRecentMs: Number.isInteger(epoch) && Math.abs(epoch - Date.now()) < 60000,
      sourceIp: rc.identity.sourceIp,
      userAgent: rc.identity.userAgent,
    },
    body: event.body,
    isBase64Encoded: event.isBase64Encoded,
    keys: Object.keys(event).sort(),
  };
};
