"""Messaging benchmark: actorflow actors against the same work done with bare anyio.

Run: ``.venv/bin/python benchmarks/messaging.py [--quick]``. Prints one table per
backend; each actorflow figure stands next to a bare-anyio baseline measured in
the same run (a memory object stream as mailbox, a one-shot reply stream per
ask) and the ratio actorflow / bare (higher is better for rates).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from actorflow import Actor, Runtime, handler
from actorflow.runtime.actors._mailbox import Mailbox

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

QUICK = "--quick" in sys.argv
N_SEND = 20_000 if QUICK else 200_000
N_ASK = 5_000 if QUICK else 40_000
N_FAN = 500 if QUICK else 4_000
N_IDLE = 10_000
CAPACITY = 256  # the Runtime's default mailbox size, used for the bare stream too


class Add(msgspec.Struct, frozen=True):
    amount: int


class Tally(msgspec.Struct):
    total: int = 0


class Counter(Actor):
    state: Tally

    @handler
    async def add(self, msg: Add) -> int:
        self.state.total += msg.amount
        return self.state.total


class Echo(Actor):
    """No state: shows the cost of keeping the state's bytes per message."""

    @handler
    async def add(self, msg: Add) -> int:
        return msg.amount


# --- actorflow ----------------------------------------------------------------


async def af_send(actor: type[Actor]) -> float:
    async with Runtime() as runtime:
        ref = await runtime.spawn(actor, name="c")
        msg = Add(1)
        start = time.perf_counter()
        for _ in range(N_SEND):
            await ref.send(msg)
        await ref.ask(msg)  # FIFO: every send was handled before this reply
        rate = N_SEND / (time.perf_counter() - start)
    return rate


async def af_ask_serial() -> tuple[float, float]:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="c")
        msg = Add(1)
        start = time.perf_counter()
        for _ in range(N_ASK):
            await ref.ask(msg)
        rate = N_ASK / (time.perf_counter() - start)
        p50 = await _p50(lambda: ref.ask(msg))
    return rate, p50


async def af_ask_parallel() -> float:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="c")
        msg = Add(1)
        per_task = N_ASK // 100

        async def asker() -> None:
            for _ in range(per_task):
                await ref.ask(msg)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(asker)
        rate = per_task * 100 / (time.perf_counter() - start)
    return rate


async def af_fan_out() -> float:
    async with Runtime() as runtime:
        refs = [await runtime.spawn(Counter, name=f"c{i}") for i in range(8)]
        msg = Add(1)
        start = time.perf_counter()
        for _ in range(N_FAN):
            async with anyio.create_task_group() as tg:
                for ref in refs:
                    tg.start_soon(ref.ask, msg)
        rate = N_FAN * 8 / (time.perf_counter() - start)
    return rate


async def af_idle_memory() -> float:
    async with Runtime() as runtime:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        refs = [await runtime.spawn(Counter, name=f"a{i}") for i in range(N_IDLE)]
        for ref in refs:
            await ref.ask(Add(0))  # every actor has started and is idle
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    return used / N_IDLE


# --- bare anyio -----------------------------------------------------------------

Bare = tuple[Add, ObjectSendStream[int] | None]


async def _bare_actor(inbox: ObjectReceiveStream[Bare]) -> None:
    total = 0
    async with inbox:
        async for msg, reply in inbox:
            total += msg.amount
            if reply is not None:
                await reply.send(total)


async def _bare_ask(outbox: ObjectSendStream[Bare], msg: Add) -> int:
    reply_send, reply_receive = anyio.create_memory_object_stream[int](1)
    with reply_send, reply_receive:
        await outbox.send((msg, reply_send))
        return await reply_receive.receive()


async def bare_send() -> float:
    outbox, inbox = anyio.create_memory_object_stream[Bare](CAPACITY)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_bare_actor, inbox)
        msg = Add(1)
        start = time.perf_counter()
        async with outbox:
            for _ in range(N_SEND):
                await outbox.send((msg, None))
            await _bare_ask(outbox, msg)
            rate = N_SEND / (time.perf_counter() - start)
    return rate


async def bare_ask_serial() -> tuple[float, float]:
    outbox, inbox = anyio.create_memory_object_stream[Bare](CAPACITY)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_bare_actor, inbox)
        msg = Add(1)
        async with outbox:
            start = time.perf_counter()
            for _ in range(N_ASK):
                await _bare_ask(outbox, msg)
            rate = N_ASK / (time.perf_counter() - start)
            p50 = await _p50(lambda: _bare_ask(outbox, msg))
    return rate, p50


async def bare_ask_parallel() -> float:
    outbox, inbox = anyio.create_memory_object_stream[Bare](CAPACITY)
    per_task = N_ASK // 100
    msg = Add(1)

    async def asker() -> None:
        for _ in range(per_task):
            await _bare_ask(outbox, msg)

    async with anyio.create_task_group() as tg:
        tg.start_soon(_bare_actor, inbox)
        async with outbox:
            start = time.perf_counter()
            async with anyio.create_task_group() as askers:
                for _ in range(100):
                    askers.start_soon(asker)
            rate = per_task * 100 / (time.perf_counter() - start)
    return rate


async def bare_fan_out() -> float:
    msg = Add(1)
    async with anyio.create_task_group() as tg:
        outboxes = []
        for _ in range(8):
            outbox, inbox = anyio.create_memory_object_stream[Bare](CAPACITY)
            tg.start_soon(_bare_actor, inbox)
            outboxes.append(outbox)
        start = time.perf_counter()
        for _ in range(N_FAN):
            async with anyio.create_task_group() as askers:
                for outbox in outboxes:
                    askers.start_soon(_bare_ask, outbox, msg)
        rate = N_FAN * 8 / (time.perf_counter() - start)
        for outbox in outboxes:
            await outbox.aclose()
    return rate


async def _p50(ask: Callable[[], Awaitable[Any]]) -> float:
    samples = []
    for _ in range(2_000):
        start = time.perf_counter()
        await ask()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


# --- table ------------------------------------------------------------------------


async def run_backend() -> list[tuple[str, float, float | None, str]]:
    rows: list[tuple[str, float, float | None, str]] = []
    Mailbox.yield_on_put = True
    rows.append(("send msg/s (send yields)", await af_send(Counter), None, "send"))
    Mailbox.yield_on_put = False
    rows.append(("send msg/s (no yield, chosen)", await af_send(Counter), None, "send"))
    rows.append(("send msg/s (no yield, no state)", await af_send(Echo), None, "send"))
    bare = await bare_send()
    rows = [(label, value, bare, unit) for label, value, _, unit in rows]
    (af_rate, af_p50), (bare_rate, bare_p50) = await af_ask_serial(), await bare_ask_serial()
    rows.append(("ask/s, 1 in flight", af_rate, bare_rate, "rate"))
    rows.append(("ask p50 µs, 1 in flight", af_p50, bare_p50, "latency"))
    rows.append(
        ("ask/s, 100 in flight", await af_ask_parallel(), await bare_ask_parallel(), "rate")
    )
    rows.append(("fan-out 1→8 asks/s", await af_fan_out(), await bare_fan_out(), "rate"))
    rows.append(("idle actor bytes", await af_idle_memory(), None, "memory"))
    return rows


def main() -> None:
    print(f"python {sys.version.split()[0]}, anyio {_version('anyio')}, trio {_version('trio')}")
    for backend in ("asyncio", "trio"):
        rows = anyio.run(run_backend, backend=backend)
        print(f"\n{backend}")
        print(f"{'measure':34} {'actorflow':>12} {'bare anyio':>12} {'ratio':>7}")
        for label, value, bare, unit in rows:
            if bare is None:
                print(f"{label:34} {value:12,.0f} {'':>12} {'':>7}")
                continue
            # for latency, lower is better: print bare / actorflow so > 1 means faster
            ratio = bare / value if unit == "latency" else value / bare
            print(f"{label:34} {value:12,.1f} {bare:12,.1f} {ratio:6.2f}x")


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
