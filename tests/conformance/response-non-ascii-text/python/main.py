def handler(event, context):
    return "Grüße, 世界 🌍"
