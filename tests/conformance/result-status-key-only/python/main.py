def handler(event, context):
    return {"status": 404, "body": "x"}
