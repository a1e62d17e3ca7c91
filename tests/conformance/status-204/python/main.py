def handler(event, context):
    return {"statusCode": 204, "body": "ignored"}
