exports.handler = async (event, context) => {
  const first = context.getRemainingTimeInMillis();
  await new Promise((resolve) => setTimeout(resolve, 50));
  const second = context.getRemainingTimeInMillis();
  return {
    isInteger: Number.isInteger(first) && Number.isInteger(second),
    inRange: first > 0 && first <= 7000,
    decreases: second < first,
    snakeCaseToo: Number.isInteger(context.get_remaining_time_in_millis()),
    first,
    second,
  };
};
