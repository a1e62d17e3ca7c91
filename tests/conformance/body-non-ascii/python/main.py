def handler(event, context):
    body = event["body"]
    assert not event["isBase64Encoded"]
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "text/plain; charset=utf-8"},
        "body": "%d|%d|%s" % (len(body), len(body.encode("utf-8")), body),
    }
