exports.handler = async (event, context) => ({
  awsRequestId: context.awsRequestId,
  requestId: context.requestId,
  functionName: context.functionName,
  functionVersion: context.functionVersion,
  memoryLimitInMB: context.memoryLimitInMB,
  invokedFunctionArn: context.invokedFunctionArn,
  logGroupName: context.logGroupName,
  logStreamNameOk: /^\d{4}\/\d{2}\/\d{2}\/\[1\][0-9a-f]{32}$/.test(context.logStreamName),
  callbackWaitsForEmptyEventLoop: context.callbackWaitsForEmptyEventLoop,
  snake: {
    aws_request_id: context.aws_request_id,
    function_name: context.function_name,
    function_version: context.function_version,
    memory_limit_in_mb: context.memory_limit_in_mb,
  },
});
