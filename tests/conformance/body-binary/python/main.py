import base64


def handler(event, context):
    raw = base64.b64decode(event["body"])
    return {"body": event["body"], "isBase64Encoded": event["isBase64Encoded"], "hex": raw.hex(), "length": len(raw)}
