exports.handler = async (event) => {
  const h = event.headers;
  const mh = event.multiValueHeaders;
  const names = Object.keys(h);
  return {
    value: h['X-Mixed-Case'],
    contentType: h['Content-Type'],
    signature: h['X-Hub-Signature'],
    lowercaseMissing: !('content-type' in h) && !('x-mixed-case' in mh),
    sameNames: JSON.stringify([...names].sort()) === JSON.stringify(Object.keys(mh).sort()),
    hasAuthorization: names.some((k) => k.toLowerCase() === 'authorization'),
  };
};
