def handler(event, context):
    return {"statusCode": 1000, "body": "x"}
