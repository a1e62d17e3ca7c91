import json


def handler(event, context):
    body = event["body"]
    return {
        "isString": isinstance(body, str),
        "isBase64Encoded": event["isBase64Encoded"],
        "parsed": json.loads(body),
    }
