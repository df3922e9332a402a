"""Power loss at every crash point of a small workload: what SqliteStore acknowledged survives.

SIGKILL keeps the page cache, so only a disk that forgets unsynced writes can
show a missing sync. SQLite writes in C, so the workload
(:mod:`.powerloss_child`) runs under ``strace`` and the disk is rebuilt from
the log (:mod:`.powerloss`) as it would come back after a power loss at each
crash point: only what was synced (and, torn, any part of what was not), the
``-shm`` file gone (SQLite rebuilds it from the WAL). A fresh store then opens
that disk and must hold everything acknowledged before the crash, equal to
what was written: the run, every record at its position with no row
missing, the blobs, the posts (each once, in order), every synced snapshot,
the manifest's last durable update (also one that changed no byte). Snapshots
written without a sync may be lost, one deleted may come back, but whatever
is listed loads whole and equal. Before the run was acknowledged the store
may fail, but only with a named actorflow error.

The same check run on a workload whose durable commits are not synced
(``synchronous=NORMAL``) must find an acknowledged write lost: the check can fail.
"""

from __future__ import annotations

import hashlib
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec
import pytest
import sniffio

from actorflow.errors import ActorflowError, RunNotFoundError
from actorflow.storage import EventRecord, LogRecord, RunStatus, Snapshot, SqliteStore
from tests.storage.sqlite.powerloss import Trace, run_traced, strace, write_image
from tests.storage.sqlite.powerloss_child import (
    APPENDS,
    ROUNDS,
    RUN,
    blob_data,
    record,
    snapshot,
)

ROOT = Path(__file__).resolve().parents[3]
CHILD = "tests.storage.sqlite.powerloss_child"
TORN_POINTS = 30
"""Crash points sampled per seed for the torn disks (of some thousand), besides those
before each sync."""

pytestmark = pytest.mark.skipif(
    strace() is None, reason="needs strace (Debian package strace) allowed to trace here"
)


@dataclass
class Acked:
    """What the workload saw acknowledged before the crash."""

    created: bool = False
    records: dict[int, int] = field(default_factory=dict)  # position: n of record(n)
    blobs: set[int] = field(default_factory=set)
    posts: set[int] = field(default_factory=set)
    durable_snapshots: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)
    attempt: int = 0
    phase_end: bool = False
    completed: bool = False
    pruning: bool = False  # from here on the log may start later, and blobs may go

    @classmethod
    def of(cls, lines: list[str]) -> Acked:
        acked = cls()
        for line in lines:
            kind, *args = line.split()
            values = [int(a) for a in args if a.isdigit()]
            if kind == "create":
                acked.created = True
            elif kind == "append":
                acked.records[values[0]] = values[1]
            elif kind == "blob":
                acked.blobs.add(values[0])
            elif kind == "post":
                acked.posts.add(values[0])
            elif (kind == "snapshot" and values[1]) or kind == "synced":
                acked.durable_snapshots.add(values[0])
            elif kind == "deleted":
                acked.deleted.add(values[0])
            elif kind == "attempt":
                acked.attempt = max(acked.attempt, values[0])
            elif kind == "phase":
                acked.phase_end = True
            elif kind == "completed":
                acked.completed = True
            elif kind == "pruning":  # it deletes every snapshot but the last round's
                acked.pruning = True
                acked.deleted |= set(range(ROUNDS - 1))
        return acked


def trace_workload(tmp_path: Path, backend: str, mode: str) -> Trace:
    """Run the workload under strace on an empty folder; its trace."""
    folder = tmp_path / "store"
    folder.mkdir()
    log = tmp_path / "strace.log"
    argv = [sys.executable, "-m", CHILD, str(folder / "runs.db"), backend, mode]
    out = run_traced(argv, log, cwd=ROOT, timeout=120)
    assert out.splitlines()[-1:] == ["ACK done"], out
    trace = Trace(log.read_text(), str(folder), cwd=str(ROOT))
    assert trace.acks == [line[4:] for line in out.splitlines()]  # the log saw each one
    assert len(trace.events) > 200  # the workload really exercises the store
    return trace


async def traced(tmp_path: Path, mode: str) -> Trace:
    backend = sniffio.current_async_library()
    return await anyio.to_thread.run_sync(trace_workload, tmp_path, backend, mode)


async def check_after_power_loss(path: Path, acked: Acked) -> None:
    """Open the disk with a fresh store: everything acknowledged is there, and it works.

    Raises:
        AssertionError: something acknowledged is lost or wrong.
    """
    store = SqliteStore(path)
    try:
        await _check(store, acked)
    except ActorflowError as exc:  # named: before the run was acknowledged, it may
        if acked.created:
            raise AssertionError(f"the store of an acknowledged run fails: {exc!r}") from exc
    finally:
        await store.aclose()


async def _check(store: SqliteStore, acked: Acked) -> None:
    try:
        manifest = await store.read_run(RUN)
    except RunNotFoundError:
        assert not acked.created, "the acknowledged run is lost"
        return
    assert manifest.attempt >= acked.attempt, "an acknowledged manifest update is lost"
    if acked.phase_end:
        assert manifest.phase == "end", "an acknowledged manifest update (no change) is lost"
    if acked.completed:
        assert manifest.status == RunStatus.COMPLETED, (
            "an acknowledged manifest update (another connection's change) is lost"
        )
    inbox = await store.read_inbox(RUN)
    assert [e.seq for e in inbox] == list(range(len(inbox)))  # no entry missing between
    posted = {e.entry_id: e.payload for e in inbox}
    assert len(posted) == len(inbox)  # each once
    for n in sorted(acked.posts):
        assert posted.get(f"m{n}") == f"m{n}".encode(), f"the acknowledged post m{n} is lost"
    newest = await _check_snapshots(store, acked)
    # what recovery reads: the newest snapshot, and the log after it
    start = newest.position if acked.pruning and newest is not None else 0
    log = await store.read_log(RUN, start)  # a missing row is a LogCorruptedError
    for position, n in sorted(acked.records.items()):
        if position >= start:
            assert position < start + len(log), f"the acknowledged record at {position} is lost"
            assert log[position - start] == record(n), position
    appended: dict[LogRecord, int] = {record(n): n for n in range(ROUNDS * APPENDS + 1)}
    assert len({appended[r] for r in log}) == len(log)  # each an append of the workload, once
    needed = set() if acked.pruning else acked.blobs
    if newest is not None:
        needed |= {int(newest.snapshot_id[1:])}
    for n in sorted(needed):
        ref = hashlib.sha256(blob_data(n)).hexdigest()
        assert await store.has_blob(RUN, ref), f"the acknowledged blob of round {n} is lost"
        assert await store.get_blob(RUN, ref) == blob_data(n)
    # the store keeps working: appends continue after the log's end, manifests change
    lease = await store.claim(RUN, "recoverer")
    end = await store.append(RUN, [EventRecord(kind="after")])
    assert end == start + len(log) + 1
    assert await store.read_log(RUN, end - 1) == [EventRecord(kind="after")]
    before = await store.read_run(RUN)
    await store.update_run(RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.FAILED))
    assert await store.read_run(RUN) == msgspec.structs.replace(before, status=RunStatus.FAILED)
    await store.release(lease)


async def _check_snapshots(store: SqliteStore, acked: Acked) -> Snapshot | None:
    """Every synced snapshot is listed, every listed one loads equal; the newest."""
    listed = [s.snapshot_id for s in await store.list_snapshots(RUN)]  # oldest first
    for n in sorted(acked.durable_snapshots - acked.deleted):
        assert f"s{n}" in listed, f"the synced snapshot s{n} is lost"
    newest = None
    for snapshot_id in listed:  # synced or not, a listed one loads whole and equal
        newest = await store.read_snapshot(RUN, snapshot_id)
        assert newest == snapshot(int(snapshot_id[1:]))
    return newest


async def test_every_crash_point_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    trace = await traced(tmp_path, "full")
    for point in trace.crash_points(trace.last_points()):
        write_image(point.files, tmp_path / "disk", drop=["-shm"])
        await check_after_power_loss(tmp_path / "disk" / "runs.db", Acked.of(point.acks))


async def test_torn_and_reordered_unsynced_writes_keep_what_was_acknowledged(
    tmp_path: Path,
) -> None:
    trace = await traced(tmp_path, "full")
    for seed in (1, 2):
        # before each sync (the most is unsynced there) and a sample of the rest
        rng = random.Random(seed)
        points = {*trace.last_points(), *rng.sample(range(len(trace.events) + 1), TORN_POINTS)}
        for point in trace.crash_points(points, tear=True, seed=seed):
            write_image(point.files, tmp_path / "disk", drop=["-shm"])
            await check_after_power_loss(tmp_path / "disk" / "runs.db", Acked.of(point.acks))


async def test_the_check_finds_acknowledged_writes_lost_without_syncs(tmp_path: Path) -> None:
    """The harness itself: durable commits made with ``synchronous=NORMAL`` lose acknowledged
    writes at some crash point, and the check says so."""
    trace = await traced(tmp_path, "normal")
    lost: list[str] = []
    for point in trace.crash_points(trace.last_points()):
        write_image(point.files, tmp_path / "disk", drop=["-shm"])
        try:
            await check_after_power_loss(tmp_path / "disk" / "runs.db", Acked.of(point.acks))
        except AssertionError as exc:
            lost.append(str(exc))
    assert any("is lost" in message for message in lost), lost


def _hex(text: str) -> str:
    return '"' + "".join(f"\\x{b:02x}" for b in text.encode()) + '"'


def test_the_replayed_disk_keeps_only_synced_writes() -> None:
    """The harness itself: a file's writes survive once it is synced, its name once the
    folder is; a call another thread interrupted counts when it returns."""
    log = "\n".join(
        [
            f"7 openat(AT_FDCWD, {_hex('/d/f')}, O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3",
            f"7 pwrite64(3, {_hex('kept')}, 4, 0 <unfinished ...>",
            f"8 write(1, {_hex('ACK one')}, 7) = 7",
            "7 <... pwrite64 resumed>) = 4",
            "7 fdatasync(3) = 0",
            f"7 openat(AT_FDCWD, {_hex('/d')}, O_RDONLY|O_CLOEXEC) = 4",
            "7 fsync(4) = 0",
            f"7 pwrite64(3, {_hex('lost')}, 4, 2) = 4",
            f"7 unlink({_hex('/d/f')}) = 0",
            f"7 openat(AT_FDCWD, {_hex('/d/g')}, O_RDWR|O_CREAT, 0644) = 5",
            f"7 pwrite64(5, {_hex('gone')}, 4, 0) = 4",
            "7 fdatasync(5) = 0",
            "7 +++ exited with 0 +++",
        ]
    )
    trace = Trace(log, "/d")
    assert trace.acks == ["one"]
    assert trace.last_points() == [3, 4, 9, 10]  # before each sync, and the end
    points = list(trace.crash_points(trace.last_points()))
    assert [p.acks for p in points] == [["one"]] * 4  # it came before the write returned
    # f's name is durable with the folder's sync; g's name, f's unlink never were
    assert [p.files for p in points] == [{}, {}, {"f": b"kept"}, {"f": b"kept"}]
    torn = {
        tuple(sorted(p.files.items()))
        for seed in range(40)
        for p in trace.crash_points([len(trace.events)], tear=True, seed=seed)
    }
    assert (("f", b"kept"),) in torn
    assert (("f", b"kelost"),) in torn  # the unsynced write reached the disk
    assert (("f", b"kept"), ("g", b"gone")) in torn  # the unsynced name survived
    assert () in torn  # the unsynced unlink did
