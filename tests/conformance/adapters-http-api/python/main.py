import json

from mangum import Mangum


async def app(scope, receive, send):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    out = {
        "method": scope["method"],
        "path": scope["path"],
        "query": scope["query_string"].decode(),
        "signature": headers.get("x-hub-signature"),
        "cookie": headers.get("cookie"),
        "body": body.decode(),
    }
    await send({"type": "http.response.start", "status": 201,
                "headers": [(b"content-type", b"application/json"), (b"set-cookie", b"a=1"),
                            (b"set-cookie", b"b=2")]})
    await send({"type": "http.response.body", "body": json.dumps(out).encode()})


handler = Mangum(app, lifespan="off")
