def handler(event, context):
    return {
        "statusCode": 200,
        "headers": {"X-Int": 5, "X-Float": 2.5, "X-Bool": True, "X-Str": "s"},
        "multiValueHeaders": {"X-Multi": [1, False, "x"]},
        "body": "ok",
    }
