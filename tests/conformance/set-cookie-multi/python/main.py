def handler(event, context):
    return {
        "statusCode": 200,
        "multiValueHeaders": {
            "Set-Cookie": ["a=1; Path=/", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly"],
        },
        "body": "ok",
    }
