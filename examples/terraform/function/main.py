"""The function of examples/terraform (Python 3.11).

An http call: GET ?name=Ada -> {"message": "Hello, Ada!"} (GREETING from the environment).
A cron tick or a job run: the event's detail or payload comes back in the answer.
"""
import os


def handler(event, context):
    event = event or {}
    greeting = os.environ.get("GREETING") or "Hello"
    if event.get("source") in ("sless.cron", "sless.job"):
        print(f"{event['source']}: {event.get('detail') or event.get('payload')}")
        return {"ok": True, "source": event["source"]}
    params = event.get("queryStringParameters") or {}
    name = params.get("name") or "world"
    return {"message": f"{greeting}, {name}!"}
