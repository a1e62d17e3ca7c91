import sys


def handler(event, context):
    sys.stdout.buffer.write("bytes-marker ✓\n".encode("utf-8"))
    return "ok"
