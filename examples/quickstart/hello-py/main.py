import os


def handler(event, context):
    params = (event or {}).get("queryStringParameters") or {}
    name = params.get("name") or "world"
    greeting = os.environ.get("GREETING") or "Hello"
    return {"message": f"{greeting}, {name}!", "runtime": "python"}
