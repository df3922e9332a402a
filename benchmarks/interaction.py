"""Talking to a live run: what ``emit`` costs, and how fast it reaches a reader.

Run: ``.venv/bin/python benchmarks/interaction.py [--quick]``. Prints one table
per backend. Every figure is measured inside a run's orchestrator (a
``Runtime`` on a ``MemoryStore``), next to a bare-anyio baseline measured in the
same run: a memory object stream between two tasks, with the same buffer
(10,000, the default of ``handle.events()``).

- emit, no reader: ``self.emit(event)`` in a loop while nobody reads the run's
  events (what every agent pays when no one watches), in ns per call; and the
  same in a plain ``ActorSystem`` (no run: a no-op).
- emit → reader: the orchestrator emits N events (yielding to the loop every
  256, as an agent streaming tokens does between awaits) while a reader
  drains ``handle.events(lifecycle=False)``; events per second from the first
  emit to the reader holding the last. Bare: the same N through a memory
  object stream, once with ``await send.send()`` per event (how the stream is
  meant to be used) and once with ``send_nowait`` and the same yield every 256
  (the pattern ``emit`` follows; ``send`` when the buffer is full).
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import anyio
import msgspec
from _machine import cpu_model
from anyio.lowlevel import checkpoint

from actorflow import Actor, Orchestrator, RunContext, Runtime, handler
from actorflow.runtime.actors import ActorSystem
from actorflow.storage import MemoryStore

QUICK = "--quick" in sys.argv
N = 50_000 if QUICK else 400_000
N_IDLE = 200_000 if QUICK else 2_000_000
REPEATS = 3 if QUICK else 5
BATCH = 256
BUFFER = 10_000


class Token(msgspec.Struct, frozen=True):
    n: int


class Results(msgspec.Struct):
    emit_idle_ns: float = 0.0
    emit_reader: float = 0.0
    bare_send: float = 0.0
    bare_nowait: float = 0.0


async def _emit_idle(actor: Actor, n: int) -> float:
    token = Token(0)
    emit = actor.emit
    start = time.perf_counter()
    for _ in range(n):
        emit(token)
    return (time.perf_counter() - start) / n * 1e9


async def _bare(n: int, nowait: bool) -> float:
    send, receive = anyio.create_memory_object_stream[Token](BUFFER)
    got = 0

    async def read() -> None:
        nonlocal got
        async with receive:
            async for _ in receive:
                got += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        async with send:
            for i in range(n):
                if nowait:
                    try:
                        send.send_nowait(Token(i))
                    except anyio.WouldBlock:  # the receiver takes one per loop turn
                        await send.send(Token(i))
                    if i % BATCH == BATCH - 1:
                        await checkpoint()
                else:
                    await send.send(Token(i))
    assert got == n
    return n / (time.perf_counter() - start)


class Bench(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> Results:
        results = Results()
        results.emit_idle_ns = await _emit_idle(self, N_IDLE)
        results.bare_send = await _bare(n, nowait=False)
        results.bare_nowait = await _bare(n, nowait=True)
        # nobody read so far; now the reader (outside) subscribes and counts n emits
        IDLE_DONE.set()
        await READY.wait()
        start = time.perf_counter()
        for i in range(n):
            self.emit(Token(i))
            if i % BATCH == BATCH - 1:
                await checkpoint()
        await DRAINED.wait()
        results.emit_reader = n / (time.perf_counter() - start)
        return results


IDLE_DONE = anyio.Event()
READY = anyio.Event()
DRAINED = anyio.Event()


class Quiet(Actor):
    @handler
    async def idle(self, n: int) -> float:
        return await _emit_idle(self, n)


async def one_round() -> tuple[Results, float]:
    global IDLE_DONE, READY, DRAINED
    IDLE_DONE, READY, DRAINED = anyio.Event(), anyio.Event(), anyio.Event()
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bench, N)
        await IDLE_DONE.wait()
        async with handle.events(lifecycle=False, replay=False) as events:
            got = 0
            READY.set()
            async for _ in events:
                got += 1
                if got == N:
                    DRAINED.set()
                    break
            assert events.dropped == 0, events.dropped
        results: Results = await handle.result()
    async with ActorSystem() as system:
        ref = await system.spawn(Quiet, name="quiet")
        plain = await ref.ask(N_IDLE)
    assert isinstance(plain, float)
    return results, plain


async def measure() -> dict[str, Any]:
    rounds = [await one_round() for _ in range(REPEATS)]
    med = statistics.median
    return {
        "emit, no reader (ns/call)": med(r.emit_idle_ns for r, _ in rounds),
        "emit outside a run (ns/call)": med(p for _, p in rounds),
        "emit → reader (events/s)": med(r.emit_reader for r, _ in rounds),
        "bare: await send() (events/s)": med(r.bare_send for r, _ in rounds),
        "bare: send_nowait, yield/256": med(r.bare_nowait for r, _ in rounds),
    }


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main() -> None:
    print(f"python {sys.version.split()[0]}, anyio {_version('anyio')}, trio {_version('trio')}")
    print(f"machine: {cpu_model()}; N={N:,}, median of {REPEATS}")
    for backend in ("asyncio", "trio"):
        m = anyio.run(measure, backend=backend)
        print(f"\n{backend}")
        print(f"{'measure':34} {'value':>14} {'vs await send':>14} {'vs nowait':>10}")
        for label, value in m.items():
            if "ns/call" in label:
                print(f"{label:34} {value:14,.0f}")
            elif label.startswith("emit"):
                r1 = value / m["bare: await send() (events/s)"]
                r2 = value / m["bare: send_nowait, yield/256"]
                print(f"{label:34} {value:14,.0f} {r1:13.2f}x {r2:9.2f}x")
            else:
                print(f"{label:34} {value:14,.0f}")


if __name__ == "__main__":
    main()
