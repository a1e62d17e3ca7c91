def handler(event, context):
    return {"statusCode": 200, "body": "plain text body"}
