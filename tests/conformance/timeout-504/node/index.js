exports.handler = async () => {
  await new Promise((resolve) => setTimeout(resolve, 5000));
  return 'too late';
};
