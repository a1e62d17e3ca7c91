from http import HTTPStatus


def handler(event, context):
    return {"statusCode": HTTPStatus.CREATED, "body": "created"}
