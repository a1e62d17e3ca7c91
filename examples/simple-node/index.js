// Converts durations with the `ms` package (see package.json).
//
// The value comes from ?value=2h, a JSON body {"value": "2 days"} or {"value": 90000},
// or - when the function is invoked directly with a plain event - the event's own "value" key.
const ms = require("ms");

function response(statusCode, payload) {
  return {
    statusCode,
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(payload),
  };
}

function rawInput(event) {
  if (!event || typeof event !== "object") return undefined;
  const params = event.queryStringParameters || {};
  if (params.value != null) return params.value;
  if (event.body) {
    const text = event.isBase64Encoded
      ? Buffer.from(event.body, "base64").toString("utf8")
      : event.body;
    const data = JSON.parse(text); // throws SyntaxError on bad JSON
    return data && typeof data === "object" ? data.value : undefined;
  }
  if (!("httpMethod" in event)) return event.value; // direct invocation
  return undefined;
}

exports.handler = async (event, context) => {
  let value;
  try {
    value = rawInput(event);
  } catch (err) {
    return response(400, { error: 'body must be JSON like {"value": "2 days"}' });
  }

  let millis;
  if (typeof value === "number" && Number.isFinite(value)) {
    millis = value;
  } else if (typeof value === "string" && value.trim() !== "" && value.length <= 100) {
    millis = ms(value.trim()); // undefined when the text is not a duration
  }
  if (typeof millis !== "number" || Number.isNaN(millis)) {
    return response(400, { error: 'pass a duration as ?value=2h or {"value": "2 days"}' });
  }

  return {
    input: value,
    ms: millis,
    short: ms(millis),
    long: ms(millis, { long: true }),
  };
};
