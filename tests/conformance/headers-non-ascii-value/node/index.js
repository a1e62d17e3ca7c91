exports.handler = async (event) => ({ name: event.headers['X-Name'] });
