import asyncio


async def handler(event, context):
    await asyncio.sleep(0.01)
    raise RuntimeError("async boom")
