def handler(event, context):
    return undefined_name  # noqa: F821
