import asyncio


async def one(n):
    await asyncio.sleep(0.01)
    return n


async def handler(event, context):
    gathered = await asyncio.gather(one(1), one(2), one(3))
    return {"async": asyncio.get_running_loop().is_running(), "gathered": list(gathered)}
