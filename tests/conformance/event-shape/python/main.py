import time
from datetime import datetime, timezone


def handler(event, context):
    rc = event["requestContext"]
    epoch = rc["requestTimeEpoch"]
    h = event["headers"]
    parsed = datetime.strptime(rc["requestTime"], "%d/%b/%Y:%H:%M:%S %z")
    return {
        "resource": event["resource"],
        "path": event["path"],
        "httpMethod": event["httpMethod"],
        "pathParameters": event["pathParameters"],
        "stageVariables": event["stageVariables"],
        "rc": {
            "accountId": rc["accountId"],
            "apiId": rc["apiId"],
            "resourceId": rc["resourceId"],
            "httpMethod": rc["httpMethod"],
            "path": rc["path"],
            "resourcePath": rc["resourcePath"],
            "stage": rc["stage"],
            "protocol": rc["protocol"],
            "requestId": rc["requestId"],
            "extendedRequestId": rc["extendedRequestId"],
            "requestIdIsContextId": rc["requestId"] == context.aws_request_id,
            "requestTimeIsRecentMs": isinstance(epoch, int) and abs(epoch - time.time() * 1000) < 60000,
            "requestTimeMatchesEpoch": parsed.tzinfo == timezone.utc
            and int(parsed.timestamp()) == epoch // 1000,
            "domainNameIsHost": rc["domainName"] == h["Host"],
            "domainPrefix": rc["domainPrefix"],
            "authorizer": rc["authorizer"],
            "sourceIp": rc["identity"]["sourceIp"],
            "userAgent": rc["identity"]["userAgent"],
            "identityNulls": sorted(k for k, v in rc["identity"].items() if v is None),
        },
        "forwardedFor": h["X-Forwarded-For"],
        "forwardedProto": h["X-Forwarded-Proto"],
        "forwardedPortIsHostPort": h["Host"].endswith(":" + h["X-Forwarded-Port"]),
        "body": event["body"],
        "isBase64Encoded": event["isBase64Encoded"],
        "keys": sorted(event.keys()),
        "rcKeys": sorted(rc.keys()),
    }
