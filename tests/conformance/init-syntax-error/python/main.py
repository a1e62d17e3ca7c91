def handler(event, context)
    return "missing colon"
