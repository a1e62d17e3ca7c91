import sys


def handler(event, context):
    sys.exit(3)
