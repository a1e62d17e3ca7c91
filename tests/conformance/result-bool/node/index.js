exports.handler = async () => false;
