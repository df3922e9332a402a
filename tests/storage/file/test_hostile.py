"""What another hand may leave in a file store's folder, and what the store does with it.

Each test plays one finding of an outside attack on the store (issue 23):
an OS error without a file name, a manifest copied from another run, a
snapshot name that parses as ``nan``, a bad name in the index of unfinished
runs, FIFOs and devices where files should be, and lock files left behind.
"""

from __future__ import annotations

import errno
import os
import shutil
from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow.errors import CorruptedDataError, StorageError
from actorflow.storage import Codec, FileStore, OSFileSystem, RunManifest, Snapshot

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
