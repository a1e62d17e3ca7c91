def handler(event, context):
    return {"statusCode": 200, "headers": {"X-CamelCase": "a", "content-TYPE": "text/plain"}, "body": "x"}
