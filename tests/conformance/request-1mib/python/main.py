import hashlib


def handler(event, context):
    body = event["body"]
    return {
        "length": len(body),
        "isBase64Encoded": event["isBase64Encoded"],
        "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),
    }
