def handler(event, context):
    return {"a": 1, "b": [True, None], "c": {"d": "e"}}
