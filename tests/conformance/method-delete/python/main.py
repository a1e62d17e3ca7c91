def handler(event, context):
    return {"method": event["httpMethod"], "path": event["path"], "proxy": event["pathParameters"]["proxy"]}
