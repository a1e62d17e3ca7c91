exports.handler = async (event, context) => {
  if (event && event.source === "sless.cron") {
    // A cron tick (see sless.toml); `detail` is the trigger's payload. See it with `sless logs hello-js`.
    console.log(`tick ${event.time}: ${JSON.stringify(event.detail)}`);
  }
  const params = (event && event.queryStringParameters) || {};
  const name = params.name || "world";
  const greeting = process.env.GREETING || "Hello";
  return { message: `${greeting}, ${name}!`, runtime: "node" };
};
