def handler(event, context):
    return [1, "two", None, {"x": False}]
