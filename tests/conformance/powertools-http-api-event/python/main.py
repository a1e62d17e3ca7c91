import json

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import APIGatewayProxyEventV2Model

app = APIGatewayHttpResolver()


@app.post("/items/<item_id>")
def create(item_id):
    event = app.current_event
    return {"id": item_id, "signature": event.get_header_value("X-Hub-Signature"),
            "name": event.json_body["name"]}


def handler(event, context):
    model = parse(event=event, model=APIGatewayProxyEventV2Model)  # raises on any mismatch
    rc = model.requestContext
    data = APIGatewayProxyEventV2(event)
    resolved = app.resolve(event, context)
    return {
        "model": {
            "accountId": rc.accountId,
            "apiId": rc.apiId,
            "method": rc.http.method,
            "sourceIp": str(rc.http.sourceIp).split("/")[0],
            "cookies": model.cookies,
            "rawPath": model.rawPath,
        },
        "dataClass": {
            "signature": data.get_header_value("x-hub-signature"),
            "cookies": data.cookies,
            "tag": data.query_string_parameters["tag"],
            "json": data.json_body,
        },
        "resolver": {"statusCode": resolved["statusCode"], "body": json.loads(resolved["body"])},
    }
