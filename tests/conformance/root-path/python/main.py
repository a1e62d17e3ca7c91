def handler(event, context):
    return {
        "path": event["path"],
        "rcPath": event["requestContext"]["path"],
        "pathParameters": event["pathParameters"],
        "method": event["httpMethod"],
    }
