def handler(event, context):
    return {"big": 123456789012345678901234567890, "neg": -9223372036854775809}
