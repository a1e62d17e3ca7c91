exports.handler = async (event, context) => {
  const params = (event && event.queryStringParameters) || {};
  const name = params.name || "world";
  const greeting = process.env.GREETING || "Hello";
  return { message: `${greeting}, ${name}!`, runtime: "node" };
};
