def handler(event, context):
    return {"ok": True, "items": [1, 2]}
