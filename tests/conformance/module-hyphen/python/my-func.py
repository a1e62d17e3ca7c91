def handler(event, context):
    return "hyphenated module"
