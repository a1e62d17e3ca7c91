def handler(event, context):
    return {"name": event["headers"].get("X-Name")}
