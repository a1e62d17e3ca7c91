import no_such_dependency_xyz  # noqa: F401


def handler(event, context):
    return "unreachable"
