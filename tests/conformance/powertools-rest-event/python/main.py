import datetime
import json

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import APIGatewayProxyEventModel

app = APIGatewayRestResolver()


@app.post("/items/<item_id>")
def create(item_id):
    event = app.current_event
    return {"id": item_id, "signature": event.get_header_value("X-Hub-Signature"),
            "name": event.json_body["name"]}


def handler(event, context):
    model = parse(event=event, model=APIGatewayProxyEventModel)  # raises on any mismatch
    rc = model.requestContext
    data = APIGatewayProxyEvent(event)
    resolved = app.resolve(event, context)
    return {
        "model": {
            "accountId": rc.accountId,
            "apiId": rc.apiId,
            "stage": rc.stage,
            "resourcePath": rc.resourcePath,
            "requestTimeEpochIsDatetime": isinstance(rc.requestTimeEpoch, datetime.datetime),
            "sourceIp": str(rc.identity.sourceIp).split("/")[0],
            "httpMethod": model.httpMethod,
        },
        "dataClass": {
            "signature": data.headers["X-Hub-Signature"],
            "signatureAnyCase": data.get_header_value("x-hub-signature"),
            "requestTime": bool(data.request_context.request_time),
            "sourceIp": data.request_context.identity.source_ip,
            "tags": data.multi_value_query_string_parameters["tag"],
            "json": data.json_body,
        },
        "resolver": {"statusCode": resolved["statusCode"], "body": json.loads(resolved["body"])},
    }
