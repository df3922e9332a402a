"""Whole runs on a disk that loses power at every file-system call, then recovered.

``tests/storage/file/test_powerloss.py`` proves the store keeps what it
acknowledged; this proves the runtime asks for the right things: a run on a
``FileStore`` over ``SimFS`` is cut by a power loss at each call in turn, the
disk comes back with only what was synced, and ``recover()`` in a new runtime
must give the result of a run never cut, and the one the first runtime
returned if it returned one. A finished run's manifest and snapshots are
written without syncs of their own: when the power loss takes them, the end
record in the log restores them (``run_end_restored``), and no recorded ask
runs again.

Snapshots are written without syncs too; the variants with ``tear`` bring
the disk back with torn, reordered unsynced writes (snapshots cut short, a
deletion kept and a write lost), and those with ``prune`` prune the store in
the middle of each unit, as ``actorflow prune`` may beside a live run:
retention cuts the log below the snapshots it keeps, which it must make
durable first, or recovery finds neither the records nor a snapshot.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import structlog.testing

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import ActorflowError, CorruptedDataError, RunNotFoundError
from actorflow.runtime import Durability
from actorflow.storage import (
    Codec,
    FileStore,
    RetentionPolicy,
    RunStatus,
    Snapshot,
    StepRecord,
    read_full_snapshot,
)
from actorflow.storage import _history as history
from tests.storage.file.simfs import SimFS

RUN = "cut"
UNITS = 3
EXECUTED: list[str] = []
PRUNING: list[FileStore] = []  # a store to prune in the middle of each unit, if any
KEEP_NEWEST = RetentionPolicy(keep_last=1, keep_phase_ends=False)


class Square(Request[int], frozen=True):
    n: int


class Squarer(Specialist):
    __actorflow_name__ = "tests.power_loss_runs.Squarer"

    @handler
    async def square(self, job: Square) -> int:
        EXECUTED.append(f"{self.name}/{job.n}")
        for store in PRUNING:  # as `actorflow prune` may, beside the live run
            await store.prune(KEEP_NEWEST)
        return job.n * job.n


class Units(Orchestrator):
    __actorflow_name__ = "tests.power_loss_runs.Units"

    @phase
    async def unit(self, ctx: RunContext, k: int) -> int:
        worker = await ctx.spawn(Squarer, name=f"squarer-{k}")
        squared: int = await ctx.ask(worker, Square(k + 1))
        return squared

    async def run(self, ctx: RunContext, units: int) -> list[int]:
        return [await self.unit(ctx, k) for k in range(units)]


EXPECTED = [(k + 1) ** 2 for k in range(UNITS)]


def open_store(fs: SimFS) -> FileStore:
    # small segments: a log cut drops some, and a new one's folder fsync makes that durable
    return FileStore("/store", fs=fs, codec=Codec(compress_above=64), segment_bytes=512)


async def first_process(
    fs: SimFS, config: RuntimeConfig, *, prune: bool = False
) -> list[int] | None:
    """Run until the power goes; the result if ``run()`` returned one."""
    returned: list[int] | None = None
    store = open_store(fs)
    if prune:
        PRUNING.append(store)
    try:
        async with Runtime(store=store, config=config) as runtime:
            returned = await runtime.run(Units, UNITS, run_id=RUN)
    except* (ActorflowError, OSError):
        pass  # the machine is off: whatever the runtime tried last failed
    finally:
        PRUNING.clear()
    return returned


async def recorded_asks(store: FileStore) -> set[str]:
    """The agents whose asks are recorded, as recovery reads them: in the newest
    snapshot that verifies and the log after it (what pruning cut is in the former)."""
    newest = await newest_snapshot(store)
    records = await store.read_log(RUN, newest.position if newest is not None else 0)
    if newest is not None:
        records = [*newest.steps, *records]
    recorded = {r.target or "" for r in records if isinstance(r, StepRecord) and r.kind == "ask"}
    if newest is not None:  # phase "unit.k" asked squarer-k
        recorded |= {f"squarer-{p.rpartition('.')[2]}" for p in newest.phases}
    return recorded


async def newest_snapshot(store: FileStore) -> Snapshot | None:
    for info in reversed(await store.list_snapshots(RUN)):
        try:
            return await read_full_snapshot(store, RUN, info.snapshot_id)
        except CorruptedDataError:
            assert not info.durable, f"a durable snapshot is damaged: {info}"
    return None


async def second_process(fs: SimFS, config: RuntimeConfig) -> tuple[Any, list[str], bool]:
    """Recover on the disk as it came back: the result, the recorded asks that ran
    again, and whether the end record restored the manifest."""
    store = open_store(fs)
    EXECUTED.clear()
    try:
        recorded = await recorded_asks(store)
    except RunNotFoundError:
        return None, [], False
    with structlog.testing.capture_logs() as logs:
        async with Runtime(store=store, config=config) as runtime:
            recovered = await runtime.recover()
            result = recovered[RUN] if RUN in recovered else await runtime.result(RUN)
            assert (await store.read_run(RUN)).status is RunStatus.COMPLETED
    again = [e for e in EXECUTED if e.partition("/")[0] in recorded]
    restored = any(e["event"] == "run_end_restored" for e in logs)
    return result, again, restored


async def count_calls(config: RuntimeConfig, *, prune: bool = False) -> int:
    fs = SimFS()
    assert await first_process(fs, config, prune=prune) == EXPECTED
    return fs.ops


@pytest.mark.parametrize(
    ("durability", "prune", "tear", "chunks"),
    [
        (Durability.SYNC, False, False, False),
        (Durability.BATCHED, False, False, False),
        (Durability.SYNC, False, True, False),
        (Durability.SYNC, True, False, False),
        (Durability.SYNC, True, True, False),
        (Durability.SYNC, True, True, True),
    ],
    ids=["sync", "batched", "sync-torn", "sync-pruned", "sync-pruned-torn", "chunked"],
)
async def test_a_run_cut_by_power_loss_anywhere_recovers_the_uninterrupted_result(
    durability: Durability, prune: bool, tear: bool, chunks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if chunks:  # every phase's end goes to a history chunk, merged every other one
        monkeypatch.setattr(history, "FLUSH_ENTRIES", 1)
        monkeypatch.setattr(history, "FANOUT", 2)
    # with pruning, the runtime's own pass after the run prunes too
    retention = KEEP_NEWEST if prune else None
    config = RuntimeConfig(durability=durability, retention=retention)
    total = await count_calls(config, prune=prune)
    restored = 0
    for crash_at in range(1, total + 1):
        fs = SimFS(crash_at=crash_at)
        returned = await first_process(fs, config, prune=prune)
        if not fs.crashed:
            continue  # this schedule made fewer calls
        after = fs.after_power_loss(tear=tear, seed=crash_at)
        result, again, was_restored = await second_process(after, config)
        if result is None:
            assert returned is None, f"crash at {crash_at}: a returned run is gone"
            continue
        assert result == EXPECTED, f"crash at {crash_at}"
        assert again == [], f"crash at {crash_at}: recorded asks ran again"
        restored += was_restored
    # the end record did its job at least once: the manifest's unsynced write was lost
    assert restored >= 1


async def test_the_end_of_a_run_is_one_durable_record() -> None:
    """The manifest is a cache of it: rolled back by hand, recovery restores it unrun."""
    store_fs = SimFS()
    config = RuntimeConfig(retention=None)
    assert await first_process(store_fs, config) == EXPECTED
    store = open_store(store_fs)
    log = await store.read_log(RUN)
    assert log[-1].kind == "run_end"  # type: ignore[union-attr]
    await store.update_run(
        RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.RUNNING, result=None)
    )
    EXECUTED.clear()
    with structlog.testing.capture_logs() as logs:
        async with Runtime(store=store, config=config) as runtime:
            assert await runtime.recover() == {RUN: EXPECTED}
    assert EXECUTED == []
    assert [e["status"] for e in logs if e["event"] == "run_end_restored"] == ["completed"]
    assert (await open_store(store_fs).read_run(RUN)).status is RunStatus.COMPLETED


async def recovering_process(fs: SimFS, config: RuntimeConfig) -> None:
    """Recover until the power goes."""
    try:
        async with Runtime(store=open_store(fs), config=config) as runtime:
            await runtime.recover()
    except* (ActorflowError, OSError):
        pass


@pytest.mark.parametrize("tear", [False, True], ids=["clean", "torn"])
async def test_a_recovery_cut_by_power_loss_anywhere_is_recovered_again(tear: bool) -> None:
    """The take of a run (owner, status, attempt) is written without a sync of its
    own: lost, it leaves the run an orphan as before, and the next recovery takes it."""
    config = RuntimeConfig(durability=Durability.SYNC, retention=None)
    total = await count_calls(config)
    first = SimFS(crash_at=total // 2)  # the first unit durable, the rest to run
    assert await first_process(first, config) is None
    midway = first.after_power_loss()
    assert (await open_store(midway).read_run(RUN)).status is RunStatus.RUNNING
    dry = midway.after_power_loss()  # a copy: everything on it is synced
    await recovering_process(dry, config)
    assert (await open_store(dry).read_run(RUN)).status is RunStatus.COMPLETED
    assert dry.ops > 20  # the recovery really runs units
    for crash_at in range(1, dry.ops + 1):
        fs = midway.after_power_loss()
        fs.crash_at = crash_at
        await recovering_process(fs, config)
        if not fs.crashed:
            continue
        after = fs.after_power_loss(tear=tear, seed=crash_at)
        result, again, _ = await second_process(after, config)
        assert result == EXPECTED, f"crash at {crash_at}"
        assert again == [], f"crash at {crash_at}: recorded asks ran again"
