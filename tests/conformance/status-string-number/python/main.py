def handler(event, context):
    return {"statusCode": "201", "body": "created"}
