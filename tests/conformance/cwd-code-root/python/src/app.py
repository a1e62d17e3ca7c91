import os


def handler(event, context):
    with open("data.txt") as f:
        data = f.read().strip()
    cwd = os.getcwd()
    return {
        "data": data,
        "cwdIsTaskRoot": os.path.samefile(cwd, os.environ["LAMBDA_TASK_ROOT"]),
        "cwdIsCodeDir": os.path.samefile(cwd, os.path.join(os.path.dirname(__file__), "..")),
    }
