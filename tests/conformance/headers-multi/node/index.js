exports.handler = async (event) => {
  const h = event.headers;
  const mh = event.multiValueHeaders;
  return { tag: h['x-tag'], tagMulti: mh['x-tag'], one: h['x-one'], oneMulti: mh['x-one'] };
};
