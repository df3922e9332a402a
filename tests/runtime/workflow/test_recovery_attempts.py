"""``max_recovery_attempts`` bounds attempts in a row that made no progress, not crashes."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actorflow import (
    Durability,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
)
from actorflow.errors import RunFailedError
from actorflow.storage import EventRecord, MemoryStore, RunStatus
from actorflow.testing import CrashingStore

CONFIG = RuntimeConfig(durability=Durability.SYNC, max_recovery_attempts=3)


class Tick(Request[int], frozen=True):
    n: int


class Tally(msgspec.Struct):
    total: int = 0


class Counter(Specialist):
    state: Tally

    @handler
    async def tick(self, tick: Tick) -> int:
        self.state.total += tick.n
        return self.state.total


class Ticks(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        counter = await ctx.spawn(Counter, name="counter")
        total = 0
        for i in range(n):
            total = await ctx.ask(counter, Tick(i))
        return total


async def _attempt_until_crash(store: MemoryStore, records: int, *, first: bool = False) -> None:
    """Start (``first``) or recover the run; 'kill the process' once ``records`` are durable."""
    crashing = CrashingStore(store, crash_after=records)
    with anyio.fail_after(30):
        async with (
            Runtime(store=crashing, config=CONFIG) as runtime,
            anyio.create_task_group() as tg,
        ):

            async def kill_at_crash() -> None:
                await crashing.crashed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(kill_at_crash)
            if first:
                await (await runtime.start(Ticks, 12, run_id="ticks")).wait()
            else:
                await runtime.recover("ticks")
            tg.cancel_scope.cancel()
    manifest = await store.read_run("ticks")
    assert crashing.crashed.is_set(), f"the attempt ended {manifest.status}: {manifest.error}"


async def test_a_run_whose_every_recovery_moves_it_on_is_never_failed_for_crashing() -> None:
    store = MemoryStore()
    await _attempt_until_crash(store, 3, first=True)
    for _ in range(4):  # more crashes than max_recovery_attempts, each after new steps
        before = await store.log_length("ticks")
        await _attempt_until_crash(store, 2)
        assert await store.log_length("ticks") == before + 2
        assert (await store.read_run("ticks")).status is RunStatus.RUNNING
    async with Runtime(store=store, config=CONFIG) as runtime:
        assert await runtime.recover("ticks") == {"ticks": sum(range(12))}
    manifest = await store.read_run("ticks")
    assert (manifest.attempt, manifest.progressed_attempt) == (5, 5)


async def test_attempts_in_a_row_without_progress_still_fail_the_run() -> None:
    store = MemoryStore()
    await _attempt_until_crash(store, 3, first=True)
    await _attempt_until_crash(store, 2)  # progress: the count starts again after it
    for _ in range(3):
        await _attempt_until_crash(store, 0)  # dies before its first record
    async with Runtime(store=store, config=CONFIG) as runtime:
        assert await runtime.recover() == {}
        with pytest.raises(RunFailedError, match="3 recovery attempts failed in a row"):
            await runtime.result("ticks")
    manifest = await store.read_run("ticks")
    assert (manifest.status, manifest.attempt, manifest.progressed_attempt) == (
        RunStatus.FAILED,
        5,
        1,
    )


class NeverComes(msgspec.Struct, frozen=True):
    pass


class Stuck(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> None:
        await ctx.wait_for(NeverComes)


async def test_a_recovery_past_its_timeout_ends_the_run_failed_with_its_end_recorded() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.start(Stuck, None, run_id="stuck")
    assert (await store.read_run("stuck")).status is RunStatus.INTERRUPTED
    config = RuntimeConfig(recovery_timeout=0.05)
    async with Runtime(store=store, config=config) as runtime:
        assert await runtime.recover("stuck") == {}
        with pytest.raises(RunFailedError, match="recovery_timeout"):
            await runtime.result("stuck")
    manifest = await store.read_run("stuck")
    assert manifest.status is RunStatus.FAILED
    assert manifest.error is not None
    assert "recovery_timeout" in manifest.error.message
    ends = [r for r in await store.read_log("stuck") if isinstance(r, EventRecord)]
    assert [e.kind for e in ends][-1] == "run_end"
    async with Runtime(store=store) as runtime:  # failed is final: nothing to recover
        assert await runtime.recover() == {}
    assert (await store.read_run("stuck")).status is RunStatus.FAILED
