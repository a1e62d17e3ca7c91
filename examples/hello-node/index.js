// Hello world for sless (Node.js 20, CommonJS).
//
// GET ?name=Ada  ->  {"message": "Hello, Ada!"}
// The greeting word comes from the GREETING environment variable (default "Hello").

exports.handler = async (event, context) => {
  const params = (event && event.queryStringParameters) || {};
  const name = params.name || "world";
  const greeting = process.env.GREETING || "Hello";
  // A plain object (no "statusCode") is sent back as a 200 JSON response.
  return { message: `${greeting}, ${name}!` };
};
