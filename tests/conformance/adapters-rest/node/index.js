const serverless = require('serverless-http');

// A plain Node request listener, as express or koa would be.
const app = (req, res) => {
  let body = '';
  req.on('data', (chunk) => (body += chunk));
  req.on('end', () => {
    res.statusCode = 201;
    res.setHeader('content-type', 'application/json');
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.end(
      JSON.stringify({
        method: req.method,
        url: req.url,
        signature: req.headers['x-hub-signature'] || null,
        cookie: req.headers.cookie || null,
        body,
      })
    );
  });
};

module.exports.handler = serverless(app);
