def handler(event, context):
    return {"statusCode": 200, "body": "%%% not base64 %%%", "isBase64Encoded": True}
