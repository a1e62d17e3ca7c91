CALLS = 0


def handler(event, context):
    global CALLS
    CALLS += 1
    return {"calls": CALLS}
