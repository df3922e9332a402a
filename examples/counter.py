"""The smallest actorflow program: one counter actor, a send and an ask.

Run it with ``python examples/counter.py``: it runs once on asyncio and once on trio.
"""

from __future__ import annotations

import anyio
import msgspec

from actorflow import Actor, Runtime, handler


class Add(msgspec.Struct, frozen=True):
    amount: int


class Tally(msgspec.Struct):
    total: int = 0


class Counter(Actor):
    state: Tally  # the actor's whole checkpointable state

    @handler
    async def add(self, msg: Add) -> int:
        self.state.total += msg.amount
        return self.state.total


async def main() -> None:
    async with Runtime() as runtime:
        counter = await runtime.spawn(Counter, name="counter")
        await counter.send(Add(1))  # fire-and-forget, backpressured
        assert await counter.ask(Add(2)) == 3  # request/reply
        assert counter.name == "counter"


if __name__ == "__main__":
    anyio.run(main)  # asyncio
    anyio.run(main, backend="trio")  # trio
    print("counter example ran on asyncio and trio")
