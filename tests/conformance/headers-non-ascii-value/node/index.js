exports.handler = async (event) => ({ name: event.headers['x-name'] });
