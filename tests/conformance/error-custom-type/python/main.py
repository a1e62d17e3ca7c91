class PaymentRequiredError(Exception):
    pass


def handler(event, context):
    raise PaymentRequiredError("no money")
