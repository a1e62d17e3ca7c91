def handler(event, context):
    return {"body": event["body"], "isBase64Encoded": event["isBase64Encoded"]}
