let calls = 0;

exports.handler = async () => {
  calls += 1;
  return { calls };
};
