"""Power loss at every crash point of a small workload: what was acknowledged survives.

SIGKILL keeps the page cache, so only a disk that forgets unsynced writes can
show a missing fsync. The FileStore runs over ``SimFS``; a dry run counts the
workload's file-system calls, then the workload runs again crashing at each
call in turn (and once more per point with torn, reordered unsynced writes).

Snapshots are off the durability path: one written but not synced may be
lost or torn (it must then fail its checksum, never load wrong), one synced
(by ``sync_snapshots`` or by retention, before it cuts the log below it) must
survive, and a deleted one may come back. What recovery reads, the newest
snapshot that verifies and the log after it, must always hold every record
acknowledged there, and the blobs they reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import msgspec
import pytest

from actorflow.errors import CheckpointCorruptedError, StorageError
from actorflow.storage import (
    AgentSnapshot,
    Codec,
    EventRecord,
    FileStore,
    RetentionPolicy,
    RunManifest,
    RunStatus,
    Snapshot,
    StateRef,
)
from tests.storage.file.simfs import SimFS

RUN = "run-1"


def record(n: int) -> EventRecord:
    return EventRecord(kind="tick", data=b"%d" % n + b"." * (n % 7) * 30)


def snapshot(n: int, position: int, blob: str) -> Snapshot:
    agent = AgentSnapshot(name="a", type="T", state=StateRef(agent="a", type="T", blob=blob))
    return Snapshot(
        run_id=RUN,
        snapshot_id=f"s{n}",
        position=position,
        created=1000.0 + n,
        trigger="test",
        agents={"a": agent},
        metrics={"n": float(n)},
    )


@dataclass
class Acked:
    """What the workload saw acknowledged before the crash."""

    created: bool = False
    length: int = 0
    counter: int = 0
    records: dict[int, EventRecord] = field(default_factory=dict)
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    synced: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    blobs: dict[str, bytes] = field(default_factory=dict)
    pruning: bool = False  # from here on the log may start later, and blobs may go
    attempt: int = 0


def open_store(fs: SimFS) -> FileStore:
    return FileStore("/store", fs=fs, codec=Codec(compress_above=64), segment_bytes=600)


async def workload(fs: SimFS, acked: Acked) -> None:
    store = open_store(fs)
    try:
        await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
        acked.created = True
        for n in range(4):
            async with anyio.create_task_group() as tg:  # concurrent appends share an fsync
                for _ in range(3):
                    tg.start_soon(append_one, store, acked)
            state = b"state %d " % n * 40
            ref = await store.put_blob(RUN, state)
            acked.blobs[ref] = state
            snap = snapshot(n, acked.length, ref)
            acked.snapshots[snap.snapshot_id] = snap  # written whole, if at all
            if n == 3:  # a run's end: its final snapshot and status in one call
                await store.write_snapshot(snap, update=_bump_attempt)
                # then its end, which the log holds: a manifest without a sync,
                # which a power loss may take, but never leave torn
                await store.update_run(RUN, _mark_phase, durable=False)
            else:
                await store.write_snapshot(snap)
            if n == 1:
                await store.sync_snapshots(RUN, ["s1"])
                acked.synced.add("s1")
            if n == 2:  # once asked for, it may be gone; a power loss may bring it back
                acked.deleted.add("s0")
                await store.delete_snapshot(RUN, "s0")
            if n != 3:
                await store.update_run(RUN, _bump_attempt)
            acked.attempt += 1
        # retention: the newest stays (synced first), the rest go, the log is cut
        # below it, and the blobs only the others referenced are collected
        acked.pruning = True
        acked.deleted |= {"s1", "s2"}
        await store.prune(RetentionPolicy(keep_last=1))
        acked.synced |= {s.snapshot_id for s in await store.list_snapshots(RUN) if s.durable}
        await append_one(store, acked)
    except* StorageError:
        pass  # the power went out
    finally:
        await store.aclose()


def _mark_phase(m: RunManifest) -> RunManifest:
    return msgspec.structs.replace(m, phase="end")


def _bump_attempt(m: RunManifest) -> RunManifest:
    return msgspec.structs.replace(m, attempt=m.attempt + 1)


async def append_one(store: FileStore, acked: Acked) -> None:
    rec = record(acked.counter)
    acked.counter += 1
    end = await store.append(RUN, [rec])
    acked.records[end - 1] = rec
    acked.length = max(acked.length, end)


async def check_after_power_loss(fs: SimFS, acked: Acked) -> None:
    store = open_store(fs)
    try:
        if not acked.created:
            return
        manifest = await store.read_run(RUN)
        assert manifest.attempt >= acked.attempt
        listed = {s.snapshot_id: s for s in await store.list_snapshots(RUN)}
        assert acked.synced - acked.deleted <= set(listed), "a synced snapshot was lost"
        newest: Snapshot | None = None
        for sid, info in listed.items():  # oldest first
            try:
                loaded = await store.read_snapshot(RUN, sid)
            except CheckpointCorruptedError:  # torn: only one never synced may be
                assert not info.durable, sid
                assert sid not in acked.synced, sid
                continue
            assert loaded == acked.snapshots[sid]  # nothing half-written loads
            newest = loaded
        # what recovery reads: the newest snapshot that verifies, and the log after it
        start = newest.position if newest is not None else 0
        if not acked.pruning:
            start = 0  # nothing was cut: the whole log is there
        log = await store.read_log(RUN, start)
        assert start + len(log) >= acked.length
        for position, rec in acked.records.items():
            if position >= start:
                assert log[position - start] == rec
        needed = {ref for ref in acked.blobs if not acked.pruning}
        if newest is not None:
            needed |= {a.state.blob for a in newest.agents.values() if a.state is not None}
        for ref in needed:
            assert await store.get_blob(RUN, ref) == acked.blobs[ref]
        # the store keeps working: the tail is cut and appends continue
        lease = await store.claim(RUN, "recoverer")
        end = await store.append(RUN, [EventRecord(kind="after")])
        assert (await store.read_log(RUN, end - 1)) == [EventRecord(kind="after")]
        before = await store.read_run(RUN)
        await store.update_run(RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.FAILED))
        after = await store.read_run(RUN)  # a durable change carries what it read
        assert after == msgspec.structs.replace(before, status=RunStatus.FAILED)
        await store.release(lease)
    finally:
        await store.aclose()


async def count_calls() -> int:
    fs = SimFS()
    await workload(fs, Acked())
    return fs.ops


async def test_every_crash_point_keeps_what_was_acknowledged() -> None:
    total = await count_calls()
    assert total > 100  # the workload really exercises the store
    for crash_at in range(1, total + 1):
        fs = SimFS(crash_at=crash_at)
        acked = Acked()
        await workload(fs, acked)
        if not fs.crashed:
            # trio varies the order of the concurrent appends, so how they
            # share fsyncs, so how many calls a workload makes: this one made fewer
            assert fs.ops < crash_at
            continue
        await check_after_power_loss(fs.after_power_loss(), acked)


@pytest.mark.parametrize("seed", [1, 2])
async def test_torn_and_reordered_unsynced_writes_keep_what_was_acknowledged(seed: int) -> None:
    total = await count_calls()
    for crash_at in range(1, total + 1, 2):
        fs = SimFS(crash_at=crash_at)
        acked = Acked()
        await workload(fs, acked)
        await check_after_power_loss(
            fs.after_power_loss(tear=True, seed=seed * 1000 + crash_at), acked
        )


async def test_the_simulated_disk_really_forgets_unsynced_writes() -> None:
    """The harness itself: without fsync nothing survives, with it everything does."""
    fs = SimFS()
    fs.makedirs("/d")
    h = fs.open("/d/a", "create")
    fs.write(h, b"lost")
    after = fs.after_power_loss()
    assert not after.exists("/d/a")
    fs.fsync(h)
    fs.fsync_dir("/d")
    assert fs.after_power_loss().read("/d/a") == b"lost"
