import base64


def handler(event, context):
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/octet-stream"},
        "body": base64.b64encode(bytes(range(256))).decode("ascii"),
        "isBase64Encoded": True,
    }
