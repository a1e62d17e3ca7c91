import logging

logger = logging.getLogger()
logger.setLevel(logging.INFO)
named = logging.getLogger("app.module")


def handler(event, context):
    logger.info("info-marker-from-root")
    named.info("info-marker-from-named")
    logger.debug("debug-marker")
    logger.error("error-marker")
    return {"rootHandlers": len(logging.getLogger().handlers)}
