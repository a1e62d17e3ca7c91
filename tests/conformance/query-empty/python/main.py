def handler(event, context):
    return {"q": event["queryStringParameters"], "mq": event["multiValueQueryStringParameters"]}
