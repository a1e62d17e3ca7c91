def handler(event, context):
    return {"statusCode": "abc", "body": "x"}
