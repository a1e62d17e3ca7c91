"""Hello world for sless (Python 3.11).

GET ?name=Ada  ->  {"message": "Hello, Ada!"}
The greeting word comes from the GREETING environment variable (default "Hello").
"""
import os


def handler(event, context):
    params = (event or {}).get("queryStringParameters") or {}
    name = params.get("name") or "world"
    greeting = os.environ.get("GREETING") or "Hello"
    # A plain dict (no "statusCode") is sent back as a 200 JSON response.
    return {"message": f"{greeting}, {name}!"}
