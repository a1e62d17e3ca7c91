exports.handler = async (event) => {
  const h = event.headers;
  const mh = event.multiValueHeaders;
  return { tag: h['X-Tag'], tagMulti: mh['X-Tag'], one: h['X-One'], oneMulti: mh['X-One'] };
};
