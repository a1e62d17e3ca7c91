def handler(event, context):
    return {"name": event["headers"].get("x-name")}
