import time


def handler(event, context):
    time.sleep(5)
    return "too late"
