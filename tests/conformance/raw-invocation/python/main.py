def handler(event, context):
    return {"statusCode": 404, "event": event, "isHttpEvent": "httpMethod" in event}
