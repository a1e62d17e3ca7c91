def handler(event, context):
    pass
