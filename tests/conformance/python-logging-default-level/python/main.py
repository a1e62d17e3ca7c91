import logging

logging.basicConfig(level=logging.DEBUG, format="%(message)s")


def handler(event, context):
    logging.info("info-marker-hidden")
    logging.getLogger("x").debug("debug-marker-hidden")
    logging.warning("warning-marker")
    return "logged"
