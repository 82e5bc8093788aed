"""``wait``: let time pass (events arrive, requeue timers fire)."""

from __future__ import annotations

import asyncio

from harness.runner.context import RunContext


async def run(ctx: RunContext, seconds: float) -> None:
    await asyncio.sleep(seconds)
