def handler(event, context):
    return {"statusCode": 200, "headers": {"Transfer-Encoding": "chunked"}, "body": "short"}
