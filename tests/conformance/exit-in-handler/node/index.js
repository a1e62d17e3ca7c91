exports.handler = async () => {
  process.exit(3);
};
