exports.handler = async () => {
  return undefinedName; // eslint-disable-line no-undef
};
