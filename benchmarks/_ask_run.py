"""The run several benchmarks time: an orchestrator asks one agent N times in a row.

Shared so that the guard's and tracing's costs are measured on the same shape.
"""

from __future__ import annotations

import time

from actorflow import Orchestrator, Request, RunContext, Runtime, RuntimeConfig, Specialist, handler
from actorflow.storage import MemoryStore


class Ping(Request[int], frozen=True):
    n: int


class Echo(Specialist):
    @handler
    async def ping(self, msg: Ping) -> int:
        return msg.n


class Asks(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        echo = await ctx.spawn(Echo, name="echo")
        total = 0
        for i in range(n):
            total += await ctx.ask(echo, Ping(i))
        return total


async def us_per_ask(config: RuntimeConfig, asks: int) -> float:
    """Microseconds per ask of one run of ``asks`` asks on a MemoryStore."""
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        start = time.perf_counter()
        await runtime.run(Asks, asks)
        return (time.perf_counter() - start) / asks * 1e6
