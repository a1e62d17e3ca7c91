import sibling
import shared


def handler(event, context):
    return {"sibling": sibling.NAME, "root": shared.NAME}
