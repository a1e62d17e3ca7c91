raise KeyError("config missing at import")


def handler(event, context):
    return "unreachable"
