def other(event, context):
    return "wrong name"
