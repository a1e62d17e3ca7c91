import asyncio


async def compute():
    await asyncio.sleep(0.01)
    return 42


def handler(event, context):
    return {"value": asyncio.run(compute())}
