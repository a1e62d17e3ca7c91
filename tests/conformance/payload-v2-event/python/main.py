from datetime import datetime


def handler(event, context):
    rc = event["requestContext"]
    h = event["headers"]
    parsed = datetime.strptime(rc["time"], "%d/%b/%Y:%H:%M:%S %z")
    return {
        "version": event["version"],
        "routeKey": event["routeKey"],
        "rawPath": event["rawPath"],
        "rawQueryString": event["rawQueryString"],
        "cookies": event["cookies"],
        "tag": h["x-tag"],
        "noCookieHeader": "cookie" not in h and "Cookie" not in h,
        "allLower": all(k == k.lower() for k in h),
        "query": event["queryStringParameters"],
        "http": rc["http"],
        "requestId": rc["requestId"],
        "stage": rc["stage"],
        "timeMatchesEpoch": int(parsed.timestamp()) == rc["timeEpoch"] // 1000,
        "body": event["body"],
        "isBase64Encoded": event["isBase64Encoded"],
        "keys": sorted(event),
    }
