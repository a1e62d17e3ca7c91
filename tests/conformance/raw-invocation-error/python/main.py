def handler(event, context):
    if event.get("fail"):
        raise ValueError("asked to fail")
    return "ok"
