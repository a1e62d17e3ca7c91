import json
import os


def handler(event, context):
    env = os.environ
    return {
        "greeting": env.get("GREETING"),
        "unicode": env.get("UNICODE_VALUE"),
        "config": json.loads(env["JSON_CONFIG"]),
        "lang": env.get("LANG"),
        "awsFunctionName": env.get("AWS_LAMBDA_FUNCTION_NAME"),
        "awsMemory": env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"),
        "awsVersion": env.get("AWS_LAMBDA_FUNCTION_VERSION"),
        "handlerMatches": env.get("_HANDLER") == "main.handler",
        "taskRootSet": bool(env.get("LAMBDA_TASK_ROOT")),
        "adminTokenVisible": "SLESS_ADMIN_TOKEN" in env,
        "rustLogVisible": "RUST_LOG" in env,
    }
