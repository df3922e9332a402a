"""Durable emits (``ctx.emit(..., durable=True)``) and ``runtime.watch`` from another runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.runtime import (
    DecisionMade,
    EmitRecorded,
    Emitted,
    RunEnded,
    StatusChanged,
    StepCompleted,
    WatchEvent,
)
from actorflow.storage import FileStore, MemoryStore, RunStatus, StepRecord
from actorflow.testing import CrashingStore

if TYPE_CHECKING:
    from pathlib import Path

STEPS = 3


class Progress(msgspec.Struct, frozen=True):
    step: int


class Reports(Orchestrator):
    async def run(self, ctx: RunContext, steps: int) -> int:
        for i in range(steps):
            await ctx.emit(Progress(i), durable=True)
            await ctx.now()
        await ctx.decide("done", rationale="every step reported")
        return steps


async def _emits(store: MemoryStore | FileStore, run_id: str) -> list[str]:
    return [
        r.step_id
        for r in await store.read_log(run_id)
        if isinstance(r, StepRecord) and r.kind == "emit"
    ]


async def test_a_durable_emit_is_recorded_and_reaches_readers_in_this_process() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Reports, STEPS, run_id="r")
        got = [ev async for ev in handle.events(lifecycle=False)]
    assert [ev.event for ev in got] == [Progress(i) for i in range(STEPS)]
    assert all(isinstance(ev, Emitted) and ev.durable for ev in got)
    assert [ev.step_id for ev in got] == await _emits(store, "r")


async def test_a_durable_emit_is_recorded_once_across_a_crash_and_recovery() -> None:
    inner = MemoryStore()
    crashing = CrashingStore(inner, crash_after=3)  # emit 0, now, emit 1
    async with Runtime(store=crashing) as runtime, anyio.create_task_group() as tg:
        handle = await runtime.start(Reports, STEPS, run_id="c")

        async def stop_at_crash() -> None:
            await crashing.crashed.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(stop_at_crash)
        await handle.wait()
    before = await _emits(inner, "c")
    assert len(before) == 2
    streams = []
    async with Runtime(store=inner) as runtime:
        results = await runtime.recover(
            "c", on_start=lambda h: streams.append(h.events(lifecycle=False))
        )
        assert results == {"c": STEPS}
        delivered = [ev async for ev in streams[0]]
    after = await _emits(inner, "c")
    assert len(after) == len(set(after)) == STEPS, "each emit recorded once"
    assert after[:2] == before
    # the replayed emits are neither recorded nor delivered again
    assert [ev.event for ev in delivered] == [Progress(2)]


class Slow(Orchestrator):
    async def run(self, ctx: RunContext, steps: int) -> int:
        for i in range(steps):
            await ctx.emit(Progress(i), durable=True)
            await ctx.decide("step", rationale=f"step {i}")
            await ctx.sleep(0.01)
        return steps


async def test_watch_from_another_runtime_sees_a_live_run_in_log_order_and_ends_with_it(
    tmp_path: Path,
) -> None:
    config = RuntimeConfig(flush_delay=0.005)
    seen: list[WatchEvent] = []
    async with (
        FileStore(tmp_path) as owner_store,
        FileStore(tmp_path) as watcher_store,
        Runtime(store=owner_store, config=config) as owner,
        Runtime(store=watcher_store) as watcher,
    ):
        await owner.start(Slow, 5, run_id="live")
        async for ev in watcher.watch("live", poll_interval=0.005):
            seen.append(ev)
    assert isinstance(seen[0], StatusChanged)
    assert seen[0].status is RunStatus.RUNNING
    assert isinstance(seen[-1], RunEnded)
    assert seen[-1].status is RunStatus.COMPLETED
    from_log = [ev for ev in seen if hasattr(ev, "position") and not isinstance(ev, RunEnded)]
    positions = [ev.position for ev in from_log]
    assert positions == list(range(len(positions))), "every record, in log order, once"
    emits = [ev for ev in seen if isinstance(ev, EmitRecorded)]
    assert [ev.decode(Progress) for ev in emits] == [Progress(i) for i in range(5)]
    assert emits[0].decode() == {"step": 0}
    assert {ev.type for ev in emits} == {"Progress"}
    assert {ev.agent for ev in emits} == {"orchestrator"}
    decisions = [ev for ev in seen if isinstance(ev, DecisionMade)]
    assert [d.record.rationale for d in decisions] == [f"step {i}" for i in range(5)]
    kinds = [ev.record.kind for ev in seen if isinstance(ev, StepCompleted)]
    assert kinds == ["sleep"] * 5
    # each decision right after its emit, in the log as in the code
    order = [type(ev).__name__ for ev in seen if isinstance(ev, EmitRecorded | DecisionMade)]
    assert order == ["EmitRecorded", "DecisionMade"] * 5


async def test_watch_ends_at_a_pause_unless_told_to_follow_to_the_finish() -> None:
    class Asks(Orchestrator):
        async def run(self, ctx: RunContext, _: None) -> str:
            await ctx.emit(Progress(0), durable=True)
            return await ctx.wait_for_input("go?")

    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Asks, run_id="p")
        await handle.wait()
        seen = [ev async for ev in runtime.watch("p")]
        assert isinstance(seen[-1], StatusChanged)
        assert seen[-1].status is RunStatus.PAUSED
        assert seen[-1].prompt == "go?"
        assert sum(isinstance(ev, EmitRecorded) for ev in seen) == 1
        async with anyio.create_task_group() as tg:
            followed: list[WatchEvent] = []

            async def follow() -> None:
                async for ev in runtime.watch("p", until="finished", poll_interval=0.001):
                    followed.append(ev)

            tg.start_soon(follow)
            await runtime.resume("p", "yes")
    assert isinstance(followed[-1], RunEnded)
    assert followed[-1].result == msgspec.msgpack.encode("yes")
    assert sum(isinstance(ev, EmitRecorded) for ev in followed) == 1, "replayed, not recorded again"
