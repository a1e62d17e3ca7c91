def handler(event, context):
    token = context.token
    return {"token": token, "authorization": "%s %s" % (token["token_type"], token["access_token"])}
