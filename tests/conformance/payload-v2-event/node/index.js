const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const parseTime = (text) => {
  const m = /^(\d\d)\/([A-Z][a-z]{2})\/(\d{4}):(\d\d):(\d\d):(\d\d) \+0000$/.exec(text);
  if (!m || !MONTHS.includes(m[2])) return NaN;
  return Date.UTC(+m[3], MONTHS.indexOf(m[2]), +m[1], +m[4], +m[5], +m[6]) / 1000;
};

exports.handler = async (event) => {
  const rc = event.requestContext;
  const h = event.headers;
  return {
    version: event.version,
    routeKey: event.routeKey,
    rawPath: event.rawPath,
    rawQueryString: event.rawQueryString,
    cookies: event.cookies,
    tag: h['x-tag'],
    noCookieHeader: !('cookie' in h) && !('Cookie' in h),
    allLower: Object.keys(h).every((k) => k === k.toLowerCase()),
    query: event.queryStringParameters,
    http: rc.http,
    requestId: rc.requestId,
    stage: rc.stage,
    timeMatchesEpoch: parseTime(rc.time) === Math.floor(rc.timeEpoch / 1000),
    body: event.body,
    isBase64Encoded: event.isBase64Encoded,
    keys: Object.keys(event).sort(),
  };
};
