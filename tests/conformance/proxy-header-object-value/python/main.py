def handler(event, context):
    return {"statusCode": 200, "headers": {"X-Bad": {"a": 1}}, "body": "x"}
