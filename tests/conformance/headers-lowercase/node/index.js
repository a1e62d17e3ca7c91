exports.handler = async (event) => {
  const h = event.headers;
  const mh = event.multiValueHeaders;
  const names = Object.keys(h);
  const multiNames = Object.keys(mh);
  return {
    allLower: names.every((k) => k === k.toLowerCase()),
    allLowerMulti: multiNames.every((k) => k === k.toLowerCase()),
    sameNames: JSON.stringify([...names].sort()) === JSON.stringify([...multiNames].sort()),
    value: h['x-mixed-case'],
    contentType: h['content-type'],
    hasAuthorization: names.some((k) => k.toLowerCase() === 'authorization'),
  };
};
