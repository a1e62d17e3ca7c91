def handler(event, context):
    return {"msg": "Grüße, 世界 🌍"}
