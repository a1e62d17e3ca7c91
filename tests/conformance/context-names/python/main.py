import re


def handler(event, context):
    return {
        "aws_request_id": context.aws_request_id,
        "request_id": context.request_id,
        "function_name": context.function_name,
        "function_version": context.function_version,
        "memory_limit_in_mb": context.memory_limit_in_mb,
        "invoked_function_arn": context.invoked_function_arn,
        "log_group_name": context.log_group_name,
        "log_stream_name_ok": bool(re.fullmatch(r"\d{4}/\d{2}/\d{2}/\[1\][0-9a-f]{32}", context.log_stream_name)),
        "client_context": context.client_context,
        "identity_id": context.identity.cognito_identity_id,
    }
