def handler(event, context):
    h, mh = event["headers"], event["multiValueHeaders"]
    return {"tag": h["X-Tag"], "tagMulti": mh["X-Tag"], "one": h["X-One"], "oneMulti": mh["X-One"]}
