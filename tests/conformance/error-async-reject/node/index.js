exports.handler = async () => {
  await new Promise((resolve) => setTimeout(resolve, 10));
  throw new RangeError('async boom');
};
