def handler(event, context):
    return {"values": {1, 2}}
