exports.handler = async () => {
  const env = process.env;
  return {
    greeting: env.GREETING,
    unicode: env.UNICODE_VALUE,
    config: JSON.parse(env.JSON_CONFIG),
    lang: env.LANG,
    awsFunctionName: env.AWS_LAMBDA_FUNCTION_NAME,
    awsMemory: env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsVersion: env.AWS_LAMBDA_FUNCTION_VERSION,
    handlerMatches: env._HANDLER === 'index.handler',
    taskRootSet: Boolean(env.LAMBDA_TASK_ROOT),
    adminTokenVisible: 'SLESS_ADMIN_TOKEN' in env,
    rustLogVisible: 'RUST_LOG' in env,
  };
};
