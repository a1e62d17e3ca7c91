exports.handler = async () => {};
