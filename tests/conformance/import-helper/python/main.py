import helper
from lib.util import answer


def handler(event, context):
    return {"helper": helper.shout("hello"), "pkg": answer()}
