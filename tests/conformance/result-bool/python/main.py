def handler(event, context):
    return False
