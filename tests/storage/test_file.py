"""FileStore specifics: layout, flock ownership across instances, segments, reopening."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import actorflow.storage
from actorflow.errors import RunLockedError, StorageError
from actorflow.storage import EventRecord, FileStore, RunManifest, Snapshot

if TYPE_CHECKING:
    from pathlib import Path


def manifest() -> RunManifest:
    return RunManifest(run_id="r1", workflow="w", input=b"", input_hash="")


def rec(i: int) -> EventRecord:
    return EventRecord(kind="e", data=b"%d" % i * 20)


def test_public_names_are_exported() -> None:
    for name in actorflow.storage.__all__:
        assert getattr(actorflow.storage, name) is not None
    assert "FileStore" in actorflow.storage.__all__
    assert "LogWriter" in actorflow.storage.__all__


async def test_data_survives_reopening_the_folder(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    await store.append("r1", [rec(0), rec(1)])
    await store.aclose()
    again = FileStore(tmp_path)
    assert await again.read_log("r1") == [rec(0), rec(1)]
    assert await again.append("r1", [rec(2)]) == 3


async def test_flock_excludes_a_second_store_until_the_first_closes(tmp_path: Path) -> None:
    first, second = FileStore(tmp_path), FileStore(tmp_path)
    await first.create_run(manifest())
    lease = await first.claim("r1", "worker-a")
    with pytest.raises(RunLockedError, match="owned by worker-a"):
        await second.claim("r1", "worker-b")
    assert await second.is_owned("r1")
    await first.aclose()
    assert not await second.is_owned("r1")
    taken = await second.claim("r1", "worker-b")
    assert taken.epoch == lease.epoch + 1
    await second.aclose()


async def test_log_rolls_over_segments_and_prunes_whole_ones(tmp_path: Path) -> None:
    store = FileStore(tmp_path, segment_bytes=400)
    await store.create_run(manifest())
    for i in range(20):
        await store.append("r1", [rec(i)])
    segments = sorted((tmp_path / "runs/r1/log").iterdir())
    assert len(segments) > 3
    dropped = await store.truncate_log_before("r1", 10)
    assert 0 < dropped <= 10
    assert await store.read_log("r1", 10) == [rec(i) for i in range(10, 20)]
    with pytest.raises(StorageError, match="were pruned"):
        await store.read_log("r1", 0)
    assert await store.log_length("r1") == 20
    await store.aclose()


async def test_snapshot_file_names_read_as_position_time_phase_id(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    snap = Snapshot(
        run_id="r1", snapshot_id="ck-7", position=42, created=0.0, trigger="t", phase="draft#1"
    )
    await store.write_snapshot(snap)
    (path,) = (tmp_path / "runs/r1/snapshots").iterdir()
    assert path.name == "000000042_19700101T000000Z_draft-1_ck-7.ckpt"


async def test_an_unwritable_folder_is_a_storage_error_naming_the_operation(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("not a folder")
    store = FileStore(tmp_path / "file" / "store")
    with pytest.raises(StorageError, match="create run failed"):
        await store.create_run(manifest())
