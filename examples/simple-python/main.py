"""Formats a number for humans with the `humanize` package (see requirements.txt).

The number comes from ?n=1234567, a JSON body {"n": 1234567}, or - when the
function is invoked directly with a plain event - the event's own "n" key.
"""
import base64
import json

import humanize


def _response(status, payload):
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
    }


def _raw_input(event):
    if not isinstance(event, dict):
        return None
    params = event.get("queryStringParameters") or {}
    if params.get("n") is not None:
        return params["n"]
    body = event.get("body")
    if body:
        if event.get("isBase64Encoded"):
            body = base64.b64decode(body).decode("utf-8")
        data = json.loads(body)
        return data.get("n") if isinstance(data, dict) else None
    if "httpMethod" not in event:  # direct invocation: the event is the input
        return event.get("n")
    return None


def handler(event, context):
    try:
        raw = _raw_input(event)
    except (ValueError, UnicodeDecodeError):
        return _response(400, {"error": "body must be JSON like {\"n\": 1234567}"})

    if isinstance(raw, bool):
        raw = None
    try:
        n = int(raw) if isinstance(raw, (int, str)) else None
    except ValueError:
        n = None
    if n is None:
        return _response(400, {"error": "pass an integer as ?n=1234567 or {\"n\": 1234567}"})

    return {
        "input": n,
        "intcomma": humanize.intcomma(n),
        "intword": humanize.intword(n),
        "naturalsize": humanize.naturalsize(n),
        "ordinal": humanize.ordinal(n),
    }
