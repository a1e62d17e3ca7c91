def handler(event, context):
    return {"statusCode": 200, "body": {"k": [1, 2]}}
