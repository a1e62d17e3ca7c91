import time


def handler(event, context):
    now_ms = time.time() * 1000
    deadline = context.deadline_ms
    return {
        "token": context.token,
        "request_id": context.request_id,
        "function_folder_id": context.function_folder_id,
        "function_name": context.function_name,
        "deadlineIsEpochMs": isinstance(deadline, int) and 15000 < deadline - now_ms <= 20000,
        "deadlineMatchesRemaining": abs(deadline - now_ms - context.get_remaining_time_in_millis()) < 1000,
    }
