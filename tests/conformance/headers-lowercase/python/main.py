def handler(event, context):
    h, mh = event["headers"], event["multiValueHeaders"]
    return {
        "allLower": all(k == k.lower() for k in h),
        "allLowerMulti": all(k == k.lower() for k in mh),
        "sameNames": sorted(h) == sorted(mh),
        "value": h.get("x-mixed-case"),
        "contentType": h.get("content-type"),
        "hasAuthorization": any(k.lower() == "authorization" for k in h),
    }
