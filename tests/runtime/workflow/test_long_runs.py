"""Long runs: snapshots carry what changed, their history lives in chunks and the log
(windows), recovery reads all three.

The thresholds are made tiny here (a chunk every three settled entries left
in the log, or two carried inline, two chunks per level), so a run of a few
dozen phases writes windows and writes and merges chunks at every level the
way a run of thousands does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest
import structlog.testing

from actorflow import (
    ActorRef,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import EncryptionKeyError
from actorflow.storage import (
    Codec,
    EventRecord,
    FileStore,
    MemoryStore,
    RunStatus,
    Snapshot,
    read_full_snapshot,
    settled_entries,
)
from actorflow.storage import _history as history
from actorflow.testing import crash_and_recover, run_in_memory

if TYPE_CHECKING:
    from pathlib import Path

PHASES = 14
KEY = bytes(range(32))


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "FLUSH_ENTRIES", 2)
    monkeypatch.setattr(history, "WINDOW_ENTRIES", 3)
    monkeypatch.setattr(history, "WINDOW_RECORDS", 12)
    monkeypatch.setattr(history, "FANOUT", 2)


class Double(Request[int], frozen=True):
    n: int


class Doubler(Specialist):
    __actorflow_name__ = "tests.long_runs.Doubler"

    @handler
    async def double(self, job: Double) -> int:
        return 2 * job.n


class Long(Orchestrator):
    """Phases, top-level asks and decisions: every kind of settled entry."""

    __actorflow_name__ = "tests.long_runs.Long"

    @phase
    async def unit(self, ctx: RunContext, worker: ActorRef[Doubler], k: int) -> int:
        doubled: int = await ctx.ask(worker, Double(k))
        return doubled + 1

    async def run(self, ctx: RunContext, phases: int) -> list[int]:
        worker = await ctx.spawn(Doubler, name="doubler")
        out = []
        for k in range(phases):
            out.append(await self.unit(ctx, worker, k))
            if k % 3 == 0:
                out.append(await ctx.ask(worker, Double(100 + k)))  # a top-level step
                await ctx.decide("went-on", rationale=f"after {k}")
        return out


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
async def test_every_snapshot_carries_a_bounded_part_and_names_the_rest(
    tmp_path: Path, sealed: bool
) -> None:
    store = FileStore(tmp_path, codec=Codec(keys={"k1": KEY}) if sealed else None)
    async with Runtime(store=store) as runtime:
        result = await runtime.run(Long, PHASES, run_id="long")
    assert result == await run_in_memory(Long, PHASES, run_id="long")
    infos = await store.list_snapshots("long")
    chunked = windowed = 0
    for info in infos:
        stored = await store.read_snapshot("long", info.snapshot_id)
        # never the run's past: at most what was due for a chunk, and one entry more
        assert len(settled_entries(stored)) <= history.FLUSH_ENTRIES + 1, info.snapshot_id
        if stored.window is not None:
            assert stored.window.entries <= history.WINDOW_ENTRIES + 1, info.snapshot_id
            assert stored.position - stored.window.start <= history.WINDOW_RECORDS + 4
            windowed += 1
        chunked += stored.history is not None
    assert chunked, "no snapshot named a chunk"
    assert windowed, "no snapshot named a window"
    whole = await read_full_snapshot(store, "long", infos[-1].snapshot_id)
    assert sorted(whole.phases) == sorted(f"unit.{k}" for k in range(PHASES))
    assert [d.rationale for d in whole.decisions] == [f"after {k}" for k in range(0, PHASES, 3)]
    if sealed:  # chunks are sealed as every blob of the run: unreadable without the key
        assert stored.history is not None
        blob = tmp_path / "runs" / "long" / "blobs" / stored.history.address
        assert b"after 0" not in blob.read_bytes()
        with pytest.raises(EncryptionKeyError):
            await read_full_snapshot(FileStore(tmp_path), "long", infos[-1].snapshot_id)


class Noting:
    """A store noting whether each snapshot read whole named a chunk."""

    def __init__(self) -> None:
        self.chunked = 0
        self.windowed = 0

    async def note(self, snapshot: Snapshot) -> Snapshot:
        self.chunked += snapshot.history is not None
        self.windowed += snapshot.window is not None
        return snapshot


class NotingMemory(MemoryStore, Noting):
    def __init__(self) -> None:
        MemoryStore.__init__(self)
        Noting.__init__(self)

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        return await self.note(await super().read_snapshot(run_id, snapshot_id))


class NotingFiles(FileStore, Noting):
    def __init__(self, root: Path) -> None:
        FileStore.__init__(self, root)
        Noting.__init__(self)

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        return await self.note(await super().read_snapshot(run_id, snapshot_id))


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_crash_at_every_point_recovers_from_snapshots_with_chunks(
    kind: str, tmp_path: Path
) -> None:
    expected = await run_in_memory(Long, PHASES, run_id="crash-test")
    crash_after, points, chunked, windowed = 1, 0, 0, 0
    while True:
        store: NotingMemory | NotingFiles = (
            NotingMemory() if kind == "memory" else NotingFiles(tmp_path / f"c{crash_after}")
        )
        with structlog.testing.capture_logs() as logs:
            outcome = await crash_and_recover(Long, PHASES, crash_after=crash_after, store=store)
        if not outcome.crashed:
            break
        assert outcome.recovered == expected, f"crash after {crash_after} records"
        assert not [e for e in logs if e["event"] == "checkpoint_corrupted"]
        chunked += store.chunked
        windowed += store.windowed
        crash_after, points = crash_after + 1, points + 1
    assert points > PHASES
    assert chunked, "no recovery started from a snapshot naming a chunk"
    assert windowed, "no recovery started from a snapshot naming a window"


async def test_a_lost_chunk_makes_recovery_start_from_an_older_snapshot(tmp_path: Path) -> None:
    """A power loss may take an unsynced chunk and keep the snapshot naming it."""
    store = FileStore(tmp_path)
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Long, PHASES, run_id="lost")
        await handle.result()
    infos = await store.list_snapshots("lost")
    newest = await store.read_snapshot("lost", infos[-1].snapshot_id)
    assert newest.history is not None
    await store.delete_blob("lost", newest.history.address)
    # the end record says how the run ended: mark it running again, as if cut short
    await store.update_run(
        "lost", lambda m: msgspec.structs.replace(m, status=RunStatus.RUNNING, result=None)
    )
    with structlog.testing.capture_logs() as logs:
        async with Runtime(store=store, config=RuntimeConfig()) as runtime:
            results = await runtime.recover("lost")
    assert results == {"lost": await run_in_memory(Long, PHASES, run_id="lost")}
    corrupted = [e["snapshot_id"] for e in logs if e["event"] == "checkpoint_corrupted"]
    assert infos[-1].snapshot_id in corrupted


class RetriedTwice(Orchestrator):
    __actorflow_name__ = "tests.long_runs.RetriedTwice"
    tries = 0

    @phase
    async def unit(self, ctx: RunContext, k: int) -> int:
        RetriedTwice.tries += 1
        if k == 1 and RetriedTwice.tries in (2, 3):
            ctx.retry_phase()
        return k

    async def run(self, ctx: RunContext, phases: int) -> list[int]:
        return [await self.unit(ctx, k) for k in range(phases)]


async def test_a_retried_phase_keeps_what_it_kept_before_chunks() -> None:
    """A retry's event is keyed by the attempt that gave up: the first by the
    phase's own id (``unit.1``, top level, kept as always), a later one by
    ``unit.1@1``, inside the phase, dropped at its end as always, never settled."""
    RetriedTwice.tries = 0
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        assert await runtime.run(RetriedTwice, 4, run_id="retried") == [0, 1, 2, 3]
    assert any(
        r.kind == "phase_retry"
        for r in await store.read_log("retried")
        if isinstance(r, EventRecord)
    )
    newest = (await store.list_snapshots("retried"))[-1]
    whole = await read_full_snapshot(store, "retried", newest.snapshot_id)
    assert [e.step_id for e in whole.events if e.kind == "phase_retry"] == ["unit.1"]
    assert list(whole.phases) == [f"unit.{k}" for k in range(4)]
