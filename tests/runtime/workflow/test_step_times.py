"""Step records carry when each step was issued as well as when it was recorded."""

from __future__ import annotations

import time

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, update
from actorflow.storage import MemoryStore, StepRecord


class Slow(Request[str], frozen=True):
    pass


class Gate(Specialist):
    opened: anyio.Event | None = None
    reached: anyio.Event | None = None

    @handler
    async def slow(self, _: Slow) -> str:
        assert Gate.opened is not None
        assert Gate.reached is not None
        Gate.reached.set()
        await Gate.opened.wait()
        return "done"


class Timed(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        gate = await ctx.spawn(Gate, name="gate")
        await ctx.now()
        answer: str = await ctx.ask(gate, Slow())
        return answer


async def test_each_step_record_holds_when_it_was_issued_and_when_recorded() -> None:
    store = MemoryStore()
    Gate.opened, Gate.reached = anyio.Event(), anyio.Event()
    before = time.time()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Timed, None, run_id="timed")
        await Gate.reached.wait()
        asked = time.time()  # the ask was issued before this, and is recorded after it
        Gate.opened.set()
        assert await handle.result() == "done"
    steps = [r for r in await store.read_log("timed") if isinstance(r, StepRecord)]
    assert [s.kind for s in steps] == ["spawn", "now", "ask"]
    for step in steps:
        assert before <= step.issued <= step.time
    ask = steps[-1]
    assert ask.issued <= asked <= ask.time


class Nudge(msgspec.Struct, frozen=True):
    n: int


class Waits(Orchestrator):
    @update
    async def bump(self, ctx: RunContext, message: Nudge) -> int:
        return message.n + 1

    async def run(self, ctx: RunContext, _: None) -> int:
        nudge = await ctx.wait_for(Nudge)
        return nudge.n


async def test_waits_and_updates_record_when_they_were_issued_too() -> None:
    store = MemoryStore()
    before = time.time()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Waits, None, run_id="waits")
        assert await runtime.update("waits", Nudge(1)) == 2
        sent = time.time()  # the wait was issued before this, and is recorded after it
        await runtime.signal("waits", Nudge(5))
        assert await handle.result() == 5
    steps = {r.kind: r for r in await store.read_log("waits") if isinstance(r, StepRecord)}
    for kind in ("wait", "update"):
        assert before <= steps[kind].issued <= steps[kind].time
    assert steps["wait"].issued <= sent <= steps["wait"].time
