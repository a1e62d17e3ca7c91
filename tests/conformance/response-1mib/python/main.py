def handler(event, context):
    return {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": "0123456789abcdef" * 65536}
