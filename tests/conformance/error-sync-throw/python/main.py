def handler(event, context):
    raise ValueError("boom")
