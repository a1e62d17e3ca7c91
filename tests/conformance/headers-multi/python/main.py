def handler(event, context):
    h, mh = event["headers"], event["multiValueHeaders"]
    return {"tag": h["x-tag"], "tagMulti": mh["x-tag"], "one": h["x-one"], "oneMulti": mh["x-one"]}
