"""What another hand may leave in a file store's folder, and what the store does with it.

Each test plays one finding of an outside attack on the store (issue 23):
an OS error without a file name, a manifest copied from another run, a
snapshot name that parses as ``nan``, a bad name in the index of unfinished
runs, FIFOs and devices where files should be, and lock files left behind.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import sys
import threading
import time
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from actorflow.errors import (
    CorruptedDataError,
    RunNotFoundError,
    StorageError,
    UnreadableFileError,
)
from actorflow.storage import (
    Codec,
    EventRecord,
    FileStore,
    OSFileSystem,
    RunManifest,
    Snapshot,
)

if TYPE_CHECKING:
    from pathlib import Path


def manifest(run_id: str = "r1") -> RunManifest:
    return RunManifest(run_id=run_id, workflow="w", input=b"", input_hash="", created=1.0)


def snapshot(snapshot_id: str = "s1", position: int = 0) -> Snapshot:
    return Snapshot(
        run_id="r1", snapshot_id=snapshot_id, position=position, created=2.0, trigger="t"
    )


class _FullDisk(OSFileSystem):
    """Every write meets a full disk, as ``os.write`` reports it: with no file name."""

    def write(self, handle: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


async def test_an_os_error_without_a_file_name_reads_as_the_os_said_it(tmp_path: Path) -> None:
    async with FileStore(tmp_path, fs=_FullDisk()) as store:
        with pytest.raises(StorageError) as info:
            await store.create_run(manifest())
    assert str(info.value) == f"create run failed: {os.strerror(errno.ENOSPC)}"
    assert "None" not in str(info.value)


async def test_a_manifest_copied_from_another_run_is_refused_as_corrupt(tmp_path: Path) -> None:
    async with FileStore(tmp_path, codec=Codec(compression=None)) as store:
        await store.create_run(manifest("a"))
        await store.create_run(manifest("b"))
        runs = tmp_path / "runs"
        shutil.copy(runs / "a" / "manifest", runs / "b" / "manifest")
        with pytest.raises(CorruptedDataError, match="holds the manifest of run 'a', not of 'b'"):
            await store.read_run("b")
        with capture_logs():
            assert [m.run_id for m in await store.list_runs()] == ["a"]
        [entry] = await store.list_unreadable()
        assert (entry.run_id, entry.location) == ("b", str(runs / "b" / "manifest"))


@pytest.mark.parametrize("created", ["nan", "inf", "-1.0", "1e999", "NaN"])
async def test_a_snapshot_name_with_a_time_no_snapshot_has_is_not_listed(
    tmp_path: Path, created: str
) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        await store.write_snapshot(snapshot())
        folder = tmp_path / "runs" / "r1" / "snapshots"
        (folder / f"000000001_20260101T000000Z_p_s2~t~{created}~1~1.ckpt").touch()
        (folder / "000000001_20260101T000000Z_p_s3~t~2.0~-1~1.ckpt").touch()
        (folder / "+00000001_20260101T000000Z_p_s4~t~2.0~1~1.ckpt").touch()
        assert [s.snapshot_id for s in await store.list_snapshots("r1")] == ["s1"]


@pytest.mark.parametrize("stray", ["bad name", "-x", "ü", "a" * 200])
async def test_a_name_in_the_index_that_is_no_run_id_is_skipped_and_reported(
    tmp_path: Path, stray: str
) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        marker = tmp_path / "runs" / ".unfinished" / stray
        marker.touch()
        with capture_logs() as logs:
            assert await store.list_unfinished() == ["r1"]
            assert await store.list_unfinished(unowned=True) == ["r1"]
            assert await store.reindex() == 0
        warned = [e for e in logs if e["event"] == "index_entry_invalid"]
        assert [e["location"] for e in warned] == [str(marker)]  # once per store
        [entry] = await store.list_unreadable()
        assert entry.location == str(marker)
        assert "index of unfinished runs" in entry.problem


# --- what is no regular file where a file should be -----------------------------------


def _plant(path: Path, what: str) -> None:
    """A FIFO, or a link to ``/dev/zero``, at ``path``."""
    path.unlink(missing_ok=True)
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


PLANTED = pytest.mark.parametrize("what", ["fifo", "zero"])


@PLANTED
@pytest.mark.timeout(30)
async def test_a_checkpoint_that_is_no_regular_file_is_named_and_never_read(
    tmp_path: Path, what: str
) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        await store.write_snapshot(snapshot("s1", 0))
        await store.write_snapshot(snapshot("s2", 0))
        [second] = (tmp_path / "runs" / "r1" / "snapshots").glob("*s2*")
        _plant(second, what)
        with pytest.raises(UnreadableFileError, match="not a regular file") as info:
            await store.read_snapshot("r1", "s2")
        assert info.value.location == str(second)
        assert isinstance(info.value, CorruptedDataError)  # so recovery takes the one before
        assert (await store.read_snapshot("r1", "s1")).snapshot_id == "s1"
        assert [p[0] for p in (await store.check_sealed("r1")).problems] == [str(second)]


@PLANTED
@pytest.mark.timeout(30)
async def test_a_log_segment_blob_or_manifest_that_is_no_regular_file_is_named(
    tmp_path: Path, what: str
) -> None:
    async with FileStore(tmp_path) as store:
        for run_id in ("r1", "r2"):
            await store.create_run(manifest(run_id))
        await store.append("r1", [EventRecord(kind="e", data=b"x")])
        ref = await store.put_blob("r1", b"state")
    run = tmp_path / "runs" / "r1"
    [segment] = (run / "log").iterdir()
    for planted in (segment, run / "blobs" / ref, tmp_path / "runs" / "r2" / "manifest"):
        _plant(planted, what)
    async with FileStore(tmp_path) as store:
        with pytest.raises(UnreadableFileError):
            await store.read_log("r1")
        with pytest.raises(UnreadableFileError):
            await store.get_blob("r1", ref)
        [unreadable] = await store.list_unreadable()
        assert (unreadable.run_id, unreadable.location) == ("r2", str(planted))
        problems = {p[0] for p in (await store.check_sealed("r1")).problems}
        assert problems == {str(segment), str(run / "blobs" / ref)}


@PLANTED
@pytest.mark.timeout(30)
async def test_an_inbox_entry_that_is_no_regular_file_is_skipped_and_named(
    tmp_path: Path, what: str
) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        posted = [await store.post("r1", entry_id=f"m{i}", type="T", payload=b"") for i in range(3)]
        entry = tmp_path / "runs" / "r1" / "inbox" / f"{1:020d}.msg"
        _plant(entry, what)
        with capture_logs():
            assert await store.read_inbox("r1") == [posted[0], posted[2]]
        check = await store.check_inbox("r1")
        assert [location for location, _ in check.damaged] == [str(entry)]


def test_a_file_over_the_size_actorflow_reads_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(bytes(11))
    with pytest.raises(UnreadableFileError, match="11 bytes, over the 10 bytes"):
        OSFileSystem(max_file_bytes=10).read(str(big))
    assert OSFileSystem(max_file_bytes=11).read(str(big)) == bytes(11)
    with pytest.raises(UnreadableFileError, match="a folder, not a regular file"):
        OSFileSystem().read(str(tmp_path))


# --- lock files ---------------------------------------------------------------------


async def test_a_post_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        for i in range(3):
            await store.post("r1", entry_id=f"m{i}", type="T", payload=b"")
        await store.post("r1", entry_id="m0", type="T", payload=b"")  # a retry
    names = os.listdir(tmp_path / "runs" / "r1" / "inbox")
    assert not [n for n in names if n.endswith(".lock")]
    assert len([n for n in names if n.endswith(".id")]) == 3  # the ids stay: they dedupe


_LOCK_SEEN_WITHIN = 10.0
"""Seconds a thread may take to start and block in ``lock()``: a bound, not a timing check."""


def _waiting_on(path: str) -> bool:
    inode = os.stat(path).st_ino
    with open("/proc/locks") as f:  # "<n>: -> FLOCK ADVISORY WRITE <pid> <dev>:<inode> 0 EOF"
        return any("-> FLOCK" in line and f":{inode} " in line for line in f)


@pytest.mark.timeout(30)
def test_a_lock_waited_for_while_its_file_is_removed_is_taken_on_the_file_now_there(
    tmp_path: Path,
) -> None:
    fs = OSFileSystem()
    path = str(tmp_path / "x.lock")
    held = fs.lock(path)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(fs.lock(path)), daemon=True)
    waiter.start()
    deadline = time.monotonic() + _LOCK_SEEN_WITHIN
    while not _waiting_on(path):  # until the waiter waits on the file held
        if time.monotonic() > deadline:
            fs.unlock(held)  # lets the waiter go
            waiter.join(timeout=5)
            pytest.fail(
                f"/proc/locks never showed the second lock() waiting on {path} in "
                f"{_LOCK_SEEN_WITHIN:.0f} s (does this kernel list blocked flock waiters?)"
            )
        time.sleep(0.001)
    fs.unlink(path)  # what unlock_and_remove does: the holder removes it, then lets go
    fs.unlock(held)
    waiter.join(timeout=_LOCK_SEEN_WITHIN)
    assert not waiter.is_alive(), "the waiter never got the lock once it was let go"
    [fd] = got
    try:
        assert os.fstat(fd).st_ino == os.stat(path).st_ino  # the file at the path, not the gone one
        assert fs.try_lock(path) is None  # and it excludes whoever comes next
    finally:
        fs.unlock(fd)


_POSTER = """
import sys, anyio
from actorflow.storage import FileStore

async def main(path, me):
    async with FileStore(path) as store:
        for i in range(20):
            await store.post("r1", entry_id=f"shared-{i}", type="T", payload=me.encode())
            await store.post("r1", entry_id=f"{me}-{i}", type="T", payload=b"")

anyio.run(main, sys.argv[1], sys.argv[2])
"""


async def test_posters_in_many_processes_store_each_id_once_and_leave_no_lock(
    tmp_path: Path,
) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for me in ("p0", "p1", "p2", "p3"):
                    command = [sys.executable, "-c", _POSTER, str(tmp_path), me]
                    tg.start_soon(functools.partial(anyio.run_process, command, check=True))
        ids = [e.entry_id for e in await store.read_inbox("r1")]
    assert sorted(ids) == sorted(
        [f"shared-{i}" for i in range(20)] + [f"p{p}-{i}" for p in range(4) for i in range(20)]
    )
    inbox = tmp_path / "runs" / "r1" / "inbox"
    assert len(list(inbox.glob("*.msg"))) == 100  # not one stored twice: the lock held
    assert not list(inbox.glob("*.lock"))


@pytest.mark.timeout(30)
async def test_an_unsynced_manifest_that_is_a_fifo_leaves_the_durable_one(tmp_path: Path) -> None:
    async with FileStore(tmp_path) as store:
        await store.create_run(manifest())
        os.mkfifo(tmp_path / "runs" / "r1" / "manifest.unsynced")
        assert (await store.read_run("r1")).run_id == "r1"


@pytest.mark.timeout(30)
def test_an_update_waiting_while_its_run_is_deleted_finds_no_run(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    anyio.run(store.create_run, manifest())
    lock = str(tmp_path / "runs" / "r1" / "manifest.lock")
    held = store.fs.lock(lock)
    failed: list[BaseException] = []

    def update() -> None:
        try:
            store._manifests.change("r1", lambda m: m)
        except BaseException as exc:
            failed.append(exc)

    waiter = threading.Thread(target=update)
    waiter.start()
    while not _waiting_on(lock):
        time.sleep(0.001)
    os.rename(tmp_path / "runs" / "r1", tmp_path / "runs" / ".trash-r1")  # what a delete does
    store.fs.unlock(held)
    waiter.join()
    anyio.run(store.aclose)
    [error] = failed
    assert isinstance(error, RunNotFoundError)
