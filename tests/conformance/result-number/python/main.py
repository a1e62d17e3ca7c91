def handler(event, context):
    return 42
