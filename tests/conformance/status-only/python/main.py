def handler(event, context):
    return {"statusCode": 202}
