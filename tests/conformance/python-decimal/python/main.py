from decimal import Decimal


def handler(event, context):
    return {"price": Decimal("1.5"), "count": Decimal(3)}
