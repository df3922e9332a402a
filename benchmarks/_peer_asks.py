"""One ask between two agents, timed one by one, in actorflow, pykka and autogen-core.

Each library's own idiom: actorflow ``ref.ask`` to an ``Actor`` handler in a
``Runtime``; pykka ``ActorRef.ask`` to a ``ThreadingActor`` (a thread per
actor, the caller blocks); autogen-core ``runtime.send_message`` to a
``RoutedAgent`` in a ``SingleThreadedAgentRuntime`` (asyncio only). The
handler returns the number it was sent; the caller is outside any agent.
peers.py runs these in its rounds (shape 7).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from actorflow import Actor, Runtime, handler

WARM_UP = 50


class Add(msgspec.Struct, frozen=True):
    amount: int


class Echo(Actor):
    @handler
    async def add(self, msg: Add) -> int:
        return msg.amount


async def af_asks(n: int) -> list[float]:
    """``n`` asks of one actorflow actor, each timed."""
    async with Runtime() as runtime:
        ref = await runtime.spawn(Echo, name="echo")
        msg = Add(1)
        for _ in range(WARM_UP):
            await ref.ask(msg)
        times = []
        for _ in range(n):
            start = time.perf_counter()
            await ref.ask(msg)
            times.append(time.perf_counter() - start)
    return times


def pykka_asks(n: int) -> list[float]:
    """``n`` asks of one pykka ``ThreadingActor``, each timed."""
    import pykka

    class PykkaEcho(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> Any:
            return message.amount

    ref = PykkaEcho.start()
    try:
        msg = Add(1)
        for _ in range(WARM_UP):
            ref.ask(msg)
        times = []
        for _ in range(n):
            start = time.perf_counter()
            ref.ask(msg)
            times.append(time.perf_counter() - start)
        return times
    finally:
        ref.stop()


@dataclass
class AutogenAdd:
    amount: int


try:  # autogen-core reads its handlers' type hints: its names must be this module's
    from autogen_core import (
        AgentId,
        MessageContext,
        RoutedAgent,
        SingleThreadedAgentRuntime,
        message_handler,
    )
except ImportError:
    pass
else:

    class AutogenEcho(RoutedAgent):
        def __init__(self) -> None:
            super().__init__("echo")

        @message_handler
        async def add(self, message: AutogenAdd, ctx: MessageContext) -> int:
            return message.amount


async def _autogen_asks(n: int) -> list[float]:
    runtime = SingleThreadedAgentRuntime()
    await AutogenEcho.register(runtime, "echo", AutogenEcho)
    runtime.start()
    try:
        target, msg = AgentId("echo", "default"), AutogenAdd(1)
        for _ in range(WARM_UP):
            await runtime.send_message(msg, target)
        times = []
        for _ in range(n):
            start = time.perf_counter()
            await runtime.send_message(msg, target)
            times.append(time.perf_counter() - start)
        return times
    finally:
        await runtime.stop()


def autogen_asks(n: int) -> list[float]:
    """``n`` asks of one autogen-core agent, each timed (asyncio: its only loop)."""
    return anyio.run(_autogen_asks, n, backend="asyncio")
