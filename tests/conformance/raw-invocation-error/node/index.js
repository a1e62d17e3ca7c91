exports.handler = async (event) => {
  if (event.fail) throw new TypeError('asked to fail');
  return 'ok';
};
