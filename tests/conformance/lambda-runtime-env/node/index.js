const fs = require('fs');

const NAMES = ['AWS_LAMBDA_FUNCTION_NAME', 'AWS_LAMBDA_FUNCTION_VERSION', 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  'AWS_LAMBDA_INITIALIZATION_TYPE', 'AWS_REGION', 'AWS_DEFAULT_REGION', 'TZ',
  'AWS_LAMBDA_LOG_GROUP_NAME', 'AWS_EXECUTION_ENV', '_HANDLER'];

exports.handler = async (event, context) => {
  const env = process.env;
  const out = {};
  for (const name of NAMES) out[name] = env[name] === undefined ? null : env[name];
  out.logStreamIsContexts = env.AWS_LAMBDA_LOG_STREAM_NAME === context.logStreamName;
  out.taskRootIsCwd = env.LAMBDA_TASK_ROOT === process.cwd();
  out.runtimeDirExists = fs.existsSync(env.LAMBDA_RUNTIME_DIR || '/nonexistent');
  return out;
};
