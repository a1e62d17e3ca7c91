import tinydep


def handler(event, context):
    return tinydep.shout("installed")
