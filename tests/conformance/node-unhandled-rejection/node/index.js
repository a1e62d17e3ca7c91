exports.handler = async () => {
  Promise.reject(new TypeError('nobody caught me'));
  await new Promise((resolve) => setTimeout(resolve, 300));
  return 'not reached';
};
