import os

NAMES = ["AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_VERSION", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
         "AWS_LAMBDA_INITIALIZATION_TYPE", "AWS_REGION", "AWS_DEFAULT_REGION", "TZ",
         "AWS_LAMBDA_LOG_GROUP_NAME", "AWS_EXECUTION_ENV", "_HANDLER"]


def handler(event, context):
    env = os.environ
    out = {name: env.get(name) for name in NAMES}
    out["logStreamIsContexts"] = env.get("AWS_LAMBDA_LOG_STREAM_NAME") == context.log_stream_name
    out["taskRootIsCwd"] = env.get("LAMBDA_TASK_ROOT") == os.getcwd()
    out["runtimeDirExists"] = os.path.isdir(env.get("LAMBDA_RUNTIME_DIR") or "/nonexistent")
    return out
