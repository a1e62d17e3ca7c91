import sys


def handler(event, context):
    print("to-stdout-marker")
    print("to-stderr-marker", file=sys.stderr)
    context.log("via-context-log-marker\n")
    return "ok"
