def handler(event, context):
    return {
        "statusCode": 200,
        "headers": {"X-Dup": "from-headers", "X-Only": "h"},
        "multiValueHeaders": {"x-dup": ["m1", "m2"]},
        "body": "ok",
    }
