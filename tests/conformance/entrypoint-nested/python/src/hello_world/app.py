def handler(event, context):
    return "hello from src/hello_world app"
