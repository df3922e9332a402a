"""Snapshots off the durability path: written without a sync, made durable on demand.

The log makes a run durable; a snapshot only shortens its replay. So the file
store writes one through a temp file and a rename (never half of it in view)
without fsyncing it or its folder, names it ``...~unsynced.ckpt``, and lists
it ``durable=False`` until ``sync_snapshots``. Retention makes the snapshot
it relies on durable first (``tests/storage/file/test_powerloss.py`` proves
that on a disk that loses unsynced writes).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec
import pytest
from structlog.testing import capture_logs

from actorflow.errors import CheckpointCorruptedError, CheckpointNotFoundError
from actorflow.storage import (
    EventRecord,
    FileStore,
    OSFileSystem,
    RetentionPolicy,
    RunManifest,
    Snapshot,
    SupportsSnapshotSync,
    prune_run,
    sync_snapshots,
)

if TYPE_CHECKING:
    from pathlib import Path

RUN = "r1"


class CountingFS(OSFileSystem):
    """The real file system, counting the syncs the store asks for."""

    def __init__(self) -> None:
        self.syncs: list[str] = []

    def fsync(self, handle: int) -> None:
        self.syncs.append("fsync")
        super().fsync(handle)

    def sync_data(self, handle: int) -> None:
        self.syncs.append("fdatasync")
        super().sync_data(handle)

    def sync_file(self, path: str) -> None:
        self.syncs.append("fsync")
        super().sync_file(path)

    def fsync_dir(self, path: str) -> None:
        self.syncs.append("folder fsync")
        super().fsync_dir(path)


def snap(n: int, *, trigger: str = "steps") -> Snapshot:
    return Snapshot(run_id=RUN, snapshot_id=f"s{n}", position=n, created=100.0 + n, trigger=trigger)


async def new_store(tmp_path: Path) -> tuple[FileStore, CountingFS]:
    fs = CountingFS()
    store = FileStore(tmp_path, fs=fs)
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    fs.syncs.clear()
    return store, fs


def names(tmp_path: Path) -> list[str]:
    return sorted(os.listdir(tmp_path / "runs" / RUN / "snapshots"))


async def test_a_snapshot_is_written_and_deleted_without_a_sync(tmp_path: Path) -> None:
    store, fs = await new_store(tmp_path)
    info = await store.write_snapshot(snap(1))
    assert not info.durable
    assert await store.list_snapshots(RUN) == [info]
    assert await store.read_snapshot(RUN, "s1") == snap(1)
    assert await store.delete_snapshot(RUN, "s1") == info.stored_size
    assert fs.syncs == []
    assert names(tmp_path) == []


async def test_sync_fsyncs_each_unsynced_file_then_the_folder_once(tmp_path: Path) -> None:
    store, fs = await new_store(tmp_path)
    written = [await store.write_snapshot(snap(n)) for n in range(3)]
    assert isinstance(store, SupportsSnapshotSync)
    await sync_snapshots(store, RUN, ["s0", "s2", "s2"])
    assert fs.syncs == ["fsync", "fsync", "folder fsync"]
    durable = [msgspec.structs.replace(w, durable=w.snapshot_id != "s1") for w in written]
    assert await store.list_snapshots(RUN) == durable
    assert await FileStore(tmp_path).list_snapshots(RUN) == durable  # from the names alone
    assert [n.endswith("~unsynced.ckpt") for n in names(tmp_path)] == [False, True, False]
    fs.syncs.clear()
    await store.sync_snapshots(RUN, ["s0", "s2"])  # durable already: nothing to do
    await store.sync_snapshots(RUN, [])
    assert fs.syncs == []
    with pytest.raises(CheckpointNotFoundError):
        await store.sync_snapshots(RUN, ["ghost"])
    # written again, the same snapshot is a no-op that reports the copy there
    assert (await store.write_snapshot(snap(0))).durable


async def test_a_torn_unsynced_snapshot_lists_and_fails_its_checksum(tmp_path: Path) -> None:
    """What a power loss leaves of a snapshot written just before it: recovery skips it."""
    store, _ = await new_store(tmp_path)
    info = await store.write_snapshot(snap(1))
    (name,) = names(tmp_path)
    path = tmp_path / "runs" / RUN / "snapshots" / name
    for torn in (b"", path.read_bytes()[: info.stored_size // 2]):
        path.write_bytes(torn)
        assert await FileStore(tmp_path).list_snapshots(RUN) == [info]
        with pytest.raises(CheckpointCorruptedError):
            await FileStore(tmp_path).read_snapshot(RUN, "s1")


async def test_both_names_left_by_a_power_loss_mid_sync_are_one_snapshot(
    tmp_path: Path,
) -> None:
    store, _ = await new_store(tmp_path)
    info = await store.write_snapshot(snap(1))
    (unsynced,) = names(tmp_path)
    folder = tmp_path / "runs" / RUN / "snapshots"
    os.link(folder / unsynced, folder / unsynced.replace("~unsynced", ""))
    fresh = FileStore(tmp_path)
    assert await fresh.list_snapshots(RUN) == [info]  # the safer claim: unsynced
    await fresh.sync_snapshots(RUN, ["s1"])
    assert names(tmp_path) == [unsynced.replace("~unsynced", "")]
    assert await fresh.list_snapshots(RUN) == [msgspec.structs.replace(info, durable=True)]
    assert await fresh.delete_snapshot(RUN, "s1") == info.stored_size
    assert names(tmp_path) == []


async def test_a_read_finds_a_snapshot_synced_under_it(tmp_path: Path) -> None:
    """A sync renames the file between a reader's lookup and its open: the reader looks again."""

    class SyncedMeanwhile(OSFileSystem):
        def read(self, path: str) -> bytes:
            if path.endswith("~unsynced.ckpt"):
                os.rename(path, path.replace("~unsynced", ""))
            return super().read(path)

    store, _ = await new_store(tmp_path)
    await store.write_snapshot(snap(1))
    assert await FileStore(tmp_path, fs=SyncedMeanwhile()).read_snapshot(RUN, "s1") == snap(1)


async def test_retention_syncs_what_it_relies_on_and_nothing_else(tmp_path: Path) -> None:
    store, fs = await new_store(tmp_path)
    for n in range(4):
        await store.write_snapshot(snap(n))
    # the runtime's pass after a run: it keeps the log, and drops only unsynced snapshots
    await prune_run(store, RUN, RetentionPolicy(keep_last=3), keep_log=True)
    assert [s.snapshot_id for s in await store.list_snapshots(RUN)] == ["s1", "s2", "s3"]
    assert fs.syncs == []
    # a pass that cuts the log below s2 first makes s2 and the newest, s3, durable
    await store.prune(RetentionPolicy(keep_last=2))
    listed = await store.list_snapshots(RUN)
    assert [(s.snapshot_id, s.durable) for s in listed] == [("s2", True), ("s3", True)]
    assert fs.syncs == ["fsync", "fsync", "folder fsync"]
    # dropping a durable one needs the newest durable first, even if the log stays
    await store.write_snapshot(snap(4))
    await store.write_snapshot(snap(5, trigger="torn"))
    folder = tmp_path / "runs" / RUN / "snapshots"
    (torn,) = (p for p in folder.iterdir() if "~torn~" in p.name)
    torn.write_bytes(b"")  # a power loss's leftover, newer than anything that verifies
    fs.syncs.clear()
    report = await store.prune(RetentionPolicy(keep_last=1))
    listed = await store.list_snapshots(RUN)
    assert [(s.snapshot_id, s.durable) for s in listed] == [("s4", True)]
    assert report.snapshots_deleted == 3  # s2, s3 and the torn s5
    assert fs.syncs == ["fsync", "folder fsync"]


async def test_retention_cuts_nothing_when_no_snapshot_verifies(tmp_path: Path) -> None:
    store, _ = await new_store(tmp_path)
    await store.append(RUN, [EventRecord(kind="e", data=b"%d" % i) for i in range(3)])
    for n in range(2):
        await store.write_snapshot(snap(n))
    for path in (tmp_path / "runs" / RUN / "snapshots").iterdir():
        path.write_bytes(b"")  # both lost to a power loss
    with capture_logs() as logs:
        report = await store.prune(RetentionPolicy(keep_last=1))
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["run_not_pruned"]
    assert report.snapshots_deleted == 2  # the torn ones: nothing could ever load them
    assert report.log_records_deleted == 0
    assert len(await store.read_log(RUN)) == 3
