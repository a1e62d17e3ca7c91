def handler(event, context):
    return {"statusCode": 200, "headers": {"Content-Length": "999"}, "body": "short"}
