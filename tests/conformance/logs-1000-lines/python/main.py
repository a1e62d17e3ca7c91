import sys


def handler(event, context):
    for i in range(1000):
        print("thousand-line-%04d ✓" % i)
    sys.stdout.write("tail-without-newline")
    return "printed"
