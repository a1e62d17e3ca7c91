import time


def handler(event, context):
    first = context.get_remaining_time_in_millis()
    time.sleep(0.05)
    second = context.get_remaining_time_in_millis()
    return {
        "isInteger": isinstance(first, int) and isinstance(second, int),
        "inRange": 0 < first <= 7000,
        "decreases": second < first,
        "first": first,
        "second": second,
    }
