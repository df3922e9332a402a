"""History chunks: how a snapshot names a run's settled past instead of carrying it.

The writer's merging by level, putting a history back inline (later entries
win, order kept), damage to a chunk as a damaged snapshot, chunks made
durable with the snapshot that names them, and retention's collection.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actorflow.errors import CorruptedDataError, StorageError
from actorflow.storage import (
    DecisionRecord,
    EventRecord,
    FileStore,
    HistoryWriter,
    MemoryStore,
    PhaseEndRecord,
    RetentionPolicy,
    RunManifest,
    Snapshot,
    StepRecord,
    read_full_snapshot,
    resolve_snapshot,
    settled_entries,
    sync_snapshots,
    with_history,
)
from actorflow.storage import _history as history
from tests.storage.file.simfs import SimFS

RUN = "hist"


def phase_end(i: int, result: bytes = b"r") -> PhaseEndRecord:
    return PhaseEndRecord(phase_id=f"unit.{i}", name="unit", result=result)


def head(position: int = 0, **fields: object) -> Snapshot:
    return Snapshot(
        run_id=RUN,
        snapshot_id=f"{position:04d}-p{position}",
        position=position,
        created=float(position),
        trigger="phase_end",
        **fields,  # type: ignore[arg-type]
    )


async def new_store(kind: str, tmp_path: Path) -> MemoryStore | FileStore:
    store: MemoryStore | FileStore = MemoryStore() if kind == "memory" else FileStore(tmp_path)
    await store.create_run(RunManifest(run_id=RUN, workflow="W", input=b"\xc0", input_hash="h"))
    return store


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_chunks_of_a_level_merge_into_one_of_the_next(kind: str, tmp_path: Path) -> None:
    store = await new_store(kind, tmp_path)
    writer = HistoryWriter(store, RUN, None)
    fanout = history.FANOUT
    refs = [await writer.flush([phase_end(i)]) for i in range(fanout - 1)]
    assert [r.level for r in refs] == [1] * (fanout - 1)
    merged = await writer.flush([phase_end(fanout - 1)])
    assert (merged.level, merged.entries) == (2, fanout)
    newest = await writer.flush([phase_end(fanout)])
    assert (newest.level, newest.entries) == (1, 1)
    read = await history.read_history(store, RUN, newest)
    assert read.entries == tuple(phase_end(i) for i in range(fanout + 1))
    assert read.addresses == (merged.address, newest.address), "merged-away chunks not named"


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_writer_picks_up_where_a_stored_history_ends(kind: str, tmp_path: Path) -> None:
    """A recovery's writer starts from the snapshot's newest chunk and merges with its elders."""
    store = await new_store(kind, tmp_path)
    first = HistoryWriter(store, RUN, None)
    for i in range(history.FANOUT - 2):
        await first.flush([phase_end(i)])
    second = HistoryWriter(store, RUN, first.newest)
    merged = await second.flush([phase_end(history.FANOUT - 2)])
    assert merged.level == 1, "one short of a merge: still level 1"
    merged = await second.flush([phase_end(history.FANOUT - 1)])
    assert (merged.level, merged.entries) == (2, history.FANOUT)
    read = await history.read_history(store, RUN, merged)
    assert read.entries == tuple(phase_end(i) for i in range(history.FANOUT))


async def test_put_back_inline_later_entries_win_and_order_is_kept() -> None:
    store = await new_store("memory", Path())
    writer = HistoryWriter(store, RUN, None)
    first_try = StepRecord(step_id="3", kind="wait", result=b"1")
    ref = await writer.flush(
        [phase_end(0), first_try, DecisionRecord(step_id="1", agent="o", type="a"), 7]
    )
    again = StepRecord(step_id="3", kind="wait", result=b"2")
    inner = StepRecord(step_id="unit.1/0", kind="ask", result=b"x")
    stored = with_history(
        head(9, steps=(inner,), events=(EventRecord(kind="k", step_id="unit.1/0"),)),
        [again, DecisionRecord(step_id="2", agent="o", type="b"), phase_end(1), 4],
        ref,
    )
    whole = await resolve_snapshot(store, stored)
    assert whole.history is None
    assert list(whole.phases) == ["unit.0", "unit.1"]
    assert [s.step_id for s in whole.steps] == ["3", "unit.1/0"]
    assert whole.steps[0].result == b"2", "the later record of a step replaces the earlier"
    assert [d.type for d in whole.decisions] == ["a", "b"]
    assert whole.inbox_taken == (4, 7)
    assert [e.step_id for e in whole.events] == ["unit.1/0"]
    # and what a stored snapshot carries itself starts a recovery's journal
    assert settled_entries(stored)[0] == phase_end(1)


async def test_a_snapshot_from_before_chunks_reads_as_it_is() -> None:
    old = head(3, phases={"unit.0": phase_end(0)}, inbox_taken=(1,))
    assert await resolve_snapshot(MemoryStore(), old) is old


async def test_a_damaged_or_missing_chunk_is_a_damaged_snapshot(tmp_path: Path) -> None:
    store = await new_store("file", tmp_path)
    ref = await HistoryWriter(store, RUN, None).flush([phase_end(0, os.urandom(64))])
    await store.write_snapshot(head(1, history=ref))
    path = tmp_path / "runs" / RUN / "blobs" / ref.address
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptedDataError):
        await read_full_snapshot(store, RUN, "0001-p1")
    path.unlink()
    with pytest.raises(CorruptedDataError, match="missing"):
        await read_full_snapshot(store, RUN, "0001-p1")


async def test_a_chunk_of_another_run_is_refused(tmp_path: Path) -> None:
    store = await new_store("file", tmp_path)
    await store.create_run(RunManifest(run_id="other", workflow="W", input=b"\xc0", input_hash="h"))
    foreign = await HistoryWriter(store, "other", None).flush([phase_end(0)])
    # the same bytes put under this run: sealed for "other", so its checksum or its run fails
    data = await store.get_blob("other", foreign.address)
    address = await store.put_blob(RUN, data)
    await store.write_snapshot(head(1, history=foreign.__class__(address, 1, 1)))
    with pytest.raises(CorruptedDataError):
        await read_full_snapshot(store, RUN, "0001-p1")


async def test_sync_snapshots_makes_the_chunks_they_name_durable() -> None:
    """Chunks are written unsynced, like snapshots: a power loss takes them unless synced."""
    for synced in (False, True):
        fs = SimFS()
        store = FileStore("/store", fs=fs)
        await store.create_run(RunManifest(run_id=RUN, workflow="W", input=b"\xc0", input_hash="h"))
        ref = await HistoryWriter(store, RUN, None).flush([phase_end(0)])
        await store.write_snapshot(head(1, history=ref))
        if synced:
            await sync_snapshots(store, RUN, ["0001-p1"])
        after = FileStore("/store", fs=fs.after_power_loss())
        if synced:
            whole = await read_full_snapshot(after, RUN, "0001-p1")
            assert list(whole.phases) == ["unit.0"]
        else:
            assert await after.list_snapshots(RUN) == [], "unsynced: the snapshot went too"
            assert not await after.has_blob(RUN, ref.address)


async def test_retention_keeps_the_chunks_kept_snapshots_name_and_collects_the_rest(
    tmp_path: Path,
) -> None:
    store = await new_store("file", tmp_path)
    writer = HistoryWriter(store, RUN, None)
    for i in range(history.FANOUT + 1):
        ref = await writer.flush([phase_end(i)])
        await store.write_snapshot(head(i + 1, history=ref))
    before = set(await store.list_blobs(RUN))
    assert len(before) == history.FANOUT + 1
    await store.prune(RetentionPolicy(keep_last=1, keep_phase_ends=False))
    kept = set(await store.list_blobs(RUN))
    newest = (await store.list_snapshots(RUN))[-1]
    assert kept == set(
        await history.history_addresses(store, await store.read_snapshot(RUN, newest.snapshot_id))
    )
    assert len(kept) == 2, "the level-2 chunk and the newest level-1 one"
    whole = await read_full_snapshot(store, RUN, newest.snapshot_id)
    assert list(whole.phases) == [f"unit.{i}" for i in range(history.FANOUT + 1)]


class FailingOnce(MemoryStore):
    """A store whose next blob write fails (a full disk, a lost connection)."""

    fail = False

    async def put_blob(self, run_id: str, data: bytes) -> str:
        if self.fail:
            self.fail = False
            raise StorageError("put blob", "the disk is full")
        return await super().put_blob(run_id, data)


async def test_a_failed_chunk_write_leaves_the_history_as_it_was() -> None:
    store = FailingOnce()
    await store.create_run(RunManifest(run_id=RUN, workflow="W", input=b"\xc0", input_hash="h"))
    writer = HistoryWriter(store, RUN, None)
    for i in range(history.FANOUT - 1):
        await writer.flush([phase_end(i)])
    store.fail = True
    with pytest.raises(StorageError):
        await writer.flush([phase_end(history.FANOUT - 1)])  # would have merged
    merged = await writer.flush([phase_end(history.FANOUT - 1)])
    assert (merged.level, merged.entries) == (2, history.FANOUT)
    read = await history.read_history(store, RUN, merged)
    assert read.entries == tuple(phase_end(i) for i in range(history.FANOUT))
