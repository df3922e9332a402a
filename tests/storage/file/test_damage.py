"""A file store with damage in it: links, foreign files, temp files, lost manifests.

Each test plants the damage with real files, then checks that the store
reports it and goes on with everything else.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow.errors import CorruptedDataError, RunFolderNotEmptyError
from actorflow.storage import (
    EventRecord,
    FileStore,
    OSFileSystem,
    RetentionPolicy,
    RunManifest,
    RunStatus,
    Snapshot,
)
from actorflow.storage.file._fs import write_atomic
from actorflow.storage.file._sweep import TEMP_MAX_AGE

if TYPE_CHECKING:
    from pathlib import Path


def manifest(run_id: str, status: RunStatus = RunStatus.RUNNING) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="w", input=b"", input_hash="", status=status)


def rec(i: int) -> EventRecord:
    return EventRecord(kind="e", data=b"%d" % i)


async def finished_run(store: FileStore, run_id: str) -> None:
    """A completed run with a log, a blob and a snapshot."""
    await store.create_run(manifest(run_id, RunStatus.COMPLETED))
    await store.append(run_id, [rec(0), rec(1)])
    await store.put_blob(run_id, b"state of " + run_id.encode())
    await store.write_snapshot(
        Snapshot(run_id=run_id, snapshot_id="s1", position=2, created=0.0, trigger="t")
    )


def outside_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (outside / "sub").mkdir()
    (outside / "sub" / "also.txt").write_text("mine too")
    return outside


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def leftovers(root: Path, prefix: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(prefix)]


class TestLinks:
    """Deleting never follows a link out of the store."""

    async def test_deleting_a_run_removes_planted_links_not_their_targets(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path / "store")
        await finished_run(store, "r1")
        outside = outside_folder(tmp_path)
        run = tmp_path / "store/runs/r1"
        (run / "blobs" / "evil").symlink_to(outside, target_is_directory=True)
        (run / "log" / "evil-file").symlink_to(outside / "keep.txt")
        (run / "snapshots" / "dangling").symlink_to(tmp_path / "nowhere")
        report = await store.prune(RetentionPolicy(delete_completed=True))
        assert report.runs_deleted == 1
        assert (outside / "keep.txt").read_text() == "mine"
        assert (outside / "sub" / "also.txt").read_text() == "mine too"
        assert not leftovers(tmp_path / "store", ".trash-")
        assert [os.listdir(run / part) for part in ("blobs", "log", "snapshots")] == [[], [], []]
        assert (await store.read_run("r1")).tombstone
        await store.aclose()

    async def test_a_run_part_that_is_a_link_is_unlinked_not_emptied(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path / "store")
        await finished_run(store, "r1")
        outside = outside_folder(tmp_path)
        blobs = tmp_path / "store/runs/r1/blobs"
        for name in os.listdir(blobs):
            os.unlink(blobs / name)
        blobs.rmdir()
        blobs.symlink_to(outside, target_is_directory=True)
        await store.delete_run("r1", tombstone=False)
        assert (outside / "keep.txt").read_text() == "mine"
        assert (outside / "sub" / "also.txt").read_text() == "mine too"
        assert not (tmp_path / "store/runs/r1").exists()
        assert not leftovers(tmp_path / "store", ".trash-")
        await store.aclose()


class FullDisk(OSFileSystem):
    """Every write fails as on a full disk, after writing half of it."""

    def write(self, handle: int, data: bytes) -> None:
        super().write(handle, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")


class FailingFsync(OSFileSystem):
    def fsync(self, handle: int) -> None:
        raise OSError(errno.EIO, "Input/output error")


class TestTempFiles:
    """A failed write leaves no temp file behind."""

    @pytest.mark.parametrize("fs", [FullDisk(), FailingFsync()], ids=["write", "fsync"])
    def test_a_failed_atomic_write_removes_its_temp_file(
        self, tmp_path: Path, fs: OSFileSystem
    ) -> None:
        with pytest.raises(OSError, match=r"space|Input"):
            write_atomic(fs, str(tmp_path / "target"), b"x" * 10_000)
        assert os.listdir(tmp_path) == []

    async def test_a_blob_written_to_a_full_disk_leaves_no_partial_file(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path)
        await store.create_run(manifest("r1"))
        full = FileStore(tmp_path, fs=FullDisk())
        with pytest.raises(Exception, match="No space left"):
            await full.put_blob("r1", b"a state" * 1000)
        assert os.listdir(tmp_path / "runs/r1/blobs") == []
        await store.aclose()
        await full.aclose()


class TestListing:
    """One damaged entry never hides the other runs; each is named."""

    async def test_a_damaged_manifest_is_skipped_with_a_warning_and_listed_as_unreadable(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "good")
        await finished_run(store, "bad")
        flip(tmp_path / "runs/bad/manifest", 40)
        with capture_logs() as logs:
            assert [m.run_id for m in await store.list_runs()] == ["good"]
        [warning] = [e for e in logs if e["event"] == "run_unreadable"]
        assert warning["log_level"] == "warning"
        assert warning["location"] == str(tmp_path / "runs/bad/manifest")
        assert "restore the manifest" in warning["problem"]
        [entry] = await store.list_unreadable()
        assert (entry.run_id, entry.location) == ("bad", str(tmp_path / "runs/bad/manifest"))
        with pytest.raises(CorruptedDataError):
            await store.read_run("bad")  # reading it by name still says what is wrong
        await store.aclose()

    async def test_entries_that_are_not_runs_are_skipped_and_named(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "good")
        for name in ("lost+found", "bad dir"):
            (tmp_path / "runs" / name).mkdir()
        (tmp_path / "runs" / "stray").write_text("not a run")
        with capture_logs():
            assert [m.run_id for m in await store.list_runs()] == ["good"]
        found = {e.location: e for e in await store.list_unreadable()}
        assert sorted(found) == [
            str(tmp_path / "runs" / n) for n in ("bad dir", "lost+found", "stray")
        ]
        assert all(e.run_id is None and "not a run" in e.problem for e in found.values())
        await store.aclose()

    async def test_prune_goes_on_past_damaged_entries(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "good")
        await finished_run(store, "bad")
        flip(tmp_path / "runs/bad/manifest", 40)
        (tmp_path / "runs/lost+found").mkdir()
        with capture_logs():
            report = await store.prune(RetentionPolicy(delete_completed=True))
        assert report.runs_deleted == 1
        assert (await store.read_run("good")).tombstone
        assert os.listdir(tmp_path / "runs/bad/log")  # unreadable: left as it is
        await store.aclose()


class TestLostManifest:
    """A run folder whose manifest is gone is reported, never reused."""

    async def test_a_run_folder_without_its_manifest_is_listed_as_unreadable(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "r1")
        (tmp_path / "runs/r1/manifest").unlink()
        with capture_logs() as logs:
            assert await store.list_runs() == []
        assert [e["run_id"] for e in logs if e["event"] == "run_unreadable"] == ["r1"]
        [entry] = await store.list_unreadable()
        assert entry.run_id == "r1"
        assert "without a manifest" in entry.problem
        await store.aclose()

    async def test_a_new_run_never_starts_in_a_folder_holding_an_earlier_runs_data(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "r1")
        (tmp_path / "runs/r1/manifest").unlink()
        before = sorted(p.name for p in (tmp_path / "runs/r1").rglob("*"))
        with pytest.raises(RunFolderNotEmptyError, match="move the folder") as info:
            await store.create_run(manifest("r1"))
        assert info.value.location == str(tmp_path / "runs/r1")
        assert isinstance(info.value, CorruptedDataError)
        assert sorted(p.name for p in (tmp_path / "runs/r1").rglob("*")) == before
        await store.aclose()

    async def test_empty_folders_of_an_interrupted_creation_are_reused(
        self, tmp_path: Path
    ) -> None:
        for part in ("log", "blobs", "snapshots"):
            (tmp_path / "runs/r1" / part).mkdir(parents=True)
        store = FileStore(tmp_path)
        assert await store.list_unreadable() == []
        _, created = await store.create_run(manifest("r1"))
        assert created
        await store.aclose()

    @pytest.mark.parametrize("part", ["log", "blobs", "snapshots"])
    async def test_a_part_folder_a_cut_short_creation_lost_is_made_again(
        self, tmp_path: Path, part: str
    ) -> None:
        """A power loss can keep a new run's manifest and lose a part's (empty) folder."""
        store = FileStore(tmp_path)
        await store.create_run(manifest("r1"))
        (tmp_path / "runs/r1" / part).rmdir()
        fresh = FileStore(tmp_path)
        assert await fresh.append("r1", [rec(0)]) == 1
        ref = await fresh.put_blob("r1", b"state")
        snap = Snapshot(run_id="r1", snapshot_id="s1", position=1, created=0.0, trigger="t")
        await fresh.write_snapshot(snap)
        assert await fresh.read_log("r1") == [rec(0)]
        assert await fresh.get_blob("r1", ref) == b"state"
        assert await fresh.read_snapshot("r1", "s1") == snap
        await store.aclose()
        await fresh.aclose()


def age(path: Path, seconds: float) -> None:
    """Make ``path`` look ``seconds`` old (its modification time)."""
    then = os.stat(path).st_mtime - seconds
    os.utime(path, (then, then), follow_symlinks=False)


class TestLeftovers:
    """`prune` collects what crashed writers left, and nothing a live one may still use."""

    async def test_prune_removes_stale_temp_files_and_keeps_fresh_ones(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "r1")
        run = tmp_path / "runs/r1"
        stale = [run / ".tmp-a", run / "blobs/.tmp-b", run / "snapshots/.tmp-c"]
        for path in stale:
            path.write_bytes(b"partial")
            age(path, TEMP_MAX_AGE + 60)
        fresh = run / "blobs/.tmp-live"
        fresh.write_bytes(b"being written")
        report = await store.prune(RetentionPolicy())
        assert [p.exists() for p in stale] == [False, False, False]
        assert fresh.exists()
        assert report.bytes_freed >= 3 * len(b"partial")
        await store.aclose()

    async def test_prune_removes_trash_left_by_an_interrupted_delete(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "r1")
        trash = tmp_path / "runs/.trash-0123456789abcdef"
        (trash / "blobs").mkdir(parents=True)
        (trash / "blobs" / "x").write_bytes(b"old")
        outside = outside_folder(tmp_path)
        (trash / "link").symlink_to(outside, target_is_directory=True)
        await store.prune(RetentionPolicy())
        assert not leftovers(tmp_path, ".trash-")
        assert (outside / "sub" / "also.txt").read_text() == "mine too"
        await store.aclose()

    async def test_a_foreign_file_among_blobs_is_skipped_and_named_not_fatal(
        self, tmp_path: Path
    ) -> None:
        store = FileStore(tmp_path)
        await finished_run(store, "r1")
        blobs = tmp_path / "runs/r1/blobs"
        [unreferenced] = os.listdir(blobs)  # no snapshot or record points at it
        (blobs / "notes.txt").write_text("mine")
        with capture_logs() as logs:
            report = await store.prune(RetentionPolicy())
        assert report.blobs_deleted == 1
        assert os.listdir(blobs) == ["notes.txt"]
        [warning] = [e for e in logs if e["event"] == "blob_foreign"]
        assert warning["location"] == str(blobs / "notes.txt")
        assert unreferenced not in os.listdir(blobs)
        await store.aclose()
