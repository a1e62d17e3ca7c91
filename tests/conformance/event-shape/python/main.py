import time


def handler(event, context):
    rc = event["requestContext"]
    epoch = rc["requestTimeEpoch"]
    return {
        "resource": event["resource"],
        "path": event["path"],
        "httpMethod": event["httpMethod"],
        "pathParameters": event["pathParameters"],
        "stageVariables": event["stageVariables"],
        "rc": {
            "httpMethod": rc["httpMethod"],
            "path": rc["path"],
            "resourcePath": rc["resourcePath"],
            "stage": rc["stage"],
            "protocol": rc["protocol"],
            "requestId": rc["requestId"],
            "requestIdIsContextId": rc["requestId"] == context.aws_request_id,
            "requestTimeIsRecentMs": isinstance(epoch, int) and abs(epoch - time.time() * 1000) < 60000,
            "sourceIp": rc["identity"]["sourceIp"],
            "userAgent": rc["identity"]["userAgent"],
        },
        "body": event["body"],
        "isBase64Encoded": event["isBase64Encoded"],
        "keys": sorted(event.keys()),
    }
