def handler(event, context):
    return {"statusCode": 200, "headers": {"X-Name": "café ✓"}, "body": "ok"}
