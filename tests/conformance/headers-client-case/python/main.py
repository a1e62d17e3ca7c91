def handler(event, context):
    h, mh = event["headers"], event["multiValueHeaders"]
    return {
        "value": h["X-Mixed-Case"],
        "contentType": h["Content-Type"],
        "signature": h["X-Hub-Signature"],
        "lowercaseMissing": "content-type" not in h and "x-mixed-case" not in mh,
        "sameNames": sorted(h) == sorted(mh),
        "hasAuthorization": any(k.lower() == "authorization" for k in h),
    }
