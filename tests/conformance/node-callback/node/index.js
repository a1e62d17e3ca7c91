exports.handler = (event, context, callback) => {
  setTimeout(() => callback(null, { statusCode: 201, body: 'from callback' }), 10);
};
