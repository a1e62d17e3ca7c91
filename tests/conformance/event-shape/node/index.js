const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

// API Gateway's requestTime, "09/Apr/2015:12:34:56 +0000", as epoch seconds (NaN if malformed).
const parseRequestTime = (text) => {
  const m = /^(\d\d)\/([A-Z][a-z]{2})\/(\d{4}):(\d\d):(\d\d):(\d\d) \+0000$/.exec(text);
  if (!m || !MONTHS.includes(m[2])) return NaN;
  return Date.UTC(+m[3], MONTHS.indexOf(m[2]), +m[1], +m[4], +m[5], +m[6]) / 1000;
};

exports.handler = async (event, context) => {
  const rc = event.requestContext;
  const epoch = rc.requestTimeEpoch;
  const h = event.headers;
  return {
    resource: event.resource,
    path: event.path,
    httpMethod: event.httpMethod,
    pathParameters: event.pathParameters,
    stageVariables: event.stageVariables,
    rc: {
      accountId: rc.accountId,
      apiId: rc.apiId,
      resourceId: rc.resourceId,
      httpMethod: rc.httpMethod,
      path: rc.path,
      resourcePath: rc.resourcePath,
      stage: rc.stage,
      protocol: rc.protocol,
      requestId: rc.requestId,
      extendedRequestId: rc.extendedRequestId,
      requestIdIsContextId: rc.requestId === context.awsRequestId,
      requestTimeIsRecentMs: Number.isInteger(epoch) && Math.abs(epoch - Date.now()) < 60000,
      requestTimeMatchesEpoch: parseRequestTime(rc.requestTime) === Math.floor(epoch / 1000),
      domainNameIsHost: rc.domainName === h.Host,
      domainPrefix: rc.domainPrefix,
      authorizer: rc.authorizer,
      sourceIp: rc.identity.sourceIp,
      userAgent: rc.identity.userAgent,
      identityNulls: Object.keys(rc.identity).filter((k) => rc.identity[k] === null).sort(),
    },
    forwardedFor: h['X-Forwarded-For'],
    forwardedProto: h['X-Forwarded-Proto'],
    forwardedPortIsHostPort: h.Host.endsWith(':' + h['X-Forwarded-Port']),
    body: event.body,
    isBase64Encoded: event.isBase64Encoded,
    keys: Object.keys(event).sort(),
    rcKeys: Object.keys(rc).sort(),
  };
};
