"""Conformance: content-addressed blobs and snapshots (written once, listed, limited)."""

from __future__ import annotations

import functools

import msgspec
import pytest

from actorflow.errors import (
    CheckpointNotFoundError,
    CheckpointTooLargeError,
    InvalidNameError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage import Codec, RunStatus, Store, sync_snapshots
from actorflow.testing.conformance._samples import manifest, snapshot

__all__ = ["BlobTests", "SnapshotTests"]


class BlobTests:
    """Blobs: content-addressed, stored once, refused when the address is bad."""

    async def test_blobs_are_content_addressed_and_stored_once(self, store: Store) -> None:
        await store.create_run(manifest())
        data = b"state " * 5000
        ref = await store.put_blob("run-1", data)
        assert await store.put_blob("run-1", data) == ref
        assert await store.get_blob("run-1", ref) == data
        assert await store.has_blob("run-1", ref)
        assert await store.list_blobs("run-1") == [ref]
        assert await store.delete_blob("run-1", ref) > 0
        assert not await store.has_blob("run-1", ref)
        assert await store.delete_blob("run-1", ref) == 0

    async def test_missing_blob_is_a_storage_error(self, store: Store) -> None:
        await store.create_run(manifest())
        with pytest.raises(StorageError, match="no blob"):
            await store.get_blob("run-1", "0" * 64)

    async def test_a_blob_ref_that_is_not_an_address_is_refused(self, store: Store) -> None:
        await store.create_run(manifest())
        with pytest.raises(StorageError, match="not a blob address"):
            await store.get_blob("run-1", "../../etc/passwd")


class SnapshotTests:
    """Snapshots: written once, listed oldest first, size-limited, made durable on demand."""

    async def test_write_read_list_delete(self, store: Store) -> None:
        await store.create_run(manifest())
        ref = await store.put_blob("run-1", b"agent state")
        snap = snapshot("s1", 4, phase="draft#0", blob=ref, size=10_000)
        info = await store.write_snapshot(snap)
        assert (info.snapshot_id, info.position, info.phase) == ("s1", 4, "draft#0")
        assert info.raw_size > 10_000
        assert info.stored_size > 0
        assert await store.read_snapshot("run-1", "s1") == snap
        assert await store.list_snapshots("run-1") == [info]
        assert await store.delete_snapshot("run-1", "s1") > 0
        assert await store.list_snapshots("run-1") == []
        assert await store.delete_snapshot("run-1", "s1") == 0
        with pytest.raises(CheckpointNotFoundError, match="has no checkpoint 's1'"):
            await store.read_snapshot("run-1", "s1")

    async def test_snapshots_list_oldest_first_by_position(self, store: Store) -> None:
        await store.create_run(manifest())
        for sid, pos in [("c", 9), ("a", 1), ("b", 5)]:
            await store.write_snapshot(snapshot(sid, pos))
        assert [s.snapshot_id for s in await store.list_snapshots("run-1")] == ["a", "b", "c"]

    async def test_update_goes_into_the_write_that_lists_the_snapshot(self, store: Store) -> None:
        await store.create_run(manifest())
        finished = functools.partial(
            msgspec.structs.replace, status=RunStatus.COMPLETED, result=b"\xa2ok"
        )
        info = await store.write_snapshot(snapshot("final", 3), update=finished)
        stored = await store.read_run("run-1")
        assert (stored.status, stored.result) == (RunStatus.COMPLETED, b"\xa2ok")
        assert await store.list_snapshots("run-1") == [info]

    async def test_a_checkpoint_id_is_written_once(self, store: Store) -> None:
        await store.create_run(manifest())
        first = await store.write_snapshot(snapshot("s1", 1))
        assert await store.write_snapshot(snapshot("s1", 1)) == first  # the same: a no-op
        with pytest.raises(StorageError, match="different checkpoint with id 's1'"):
            await store.write_snapshot(snapshot("s1", 2))
        assert await store.list_snapshots("run-1") == [first]
        assert (await store.read_snapshot("run-1", "s1")).position == 1

    async def test_synced_snapshots_list_as_durable(self, store: Store) -> None:
        """``sync_snapshots`` (a no-op for a store that writes them durably) is idempotent."""
        await store.create_run(manifest())
        written = [await store.write_snapshot(snapshot(f"s{i}", i)) for i in range(3)]
        assert await store.list_snapshots("run-1") == written
        await sync_snapshots(store, "run-1", ["s0", "s2"])
        await sync_snapshots(store, "run-1", ["s2"])
        await sync_snapshots(store, "run-1", [])
        listed = await store.list_snapshots("run-1")
        assert [s.snapshot_id for s in listed] == ["s0", "s1", "s2"]
        assert listed[0].durable
        assert listed[2].durable
        assert listed[1] == written[1]
        for info in listed:
            assert msgspec.structs.replace(info, durable=True) == msgspec.structs.replace(
                written[info.position], durable=True
            )
            assert await store.read_snapshot("run-1", info.snapshot_id) == snapshot(
                info.snapshot_id, info.position
            )

    async def test_an_update_that_renames_the_run_is_refused(self, store: Store) -> None:
        await store.create_run(manifest())
        renamed = functools.partial(msgspec.structs.replace, run_id="run-2")
        with pytest.raises(StorageError, match="rename"):
            await store.write_snapshot(snapshot("final", 3), update=renamed)
        assert await store.list_snapshots("run-1") == []

    async def test_oversize_snapshot_is_refused_with_a_clear_error(self, store: Store) -> None:
        await store.create_run(manifest())
        codec = getattr(store, "codec", None)
        if not isinstance(codec, Codec):
            pytest.skip("the store has no actorflow Codec, whose size limit this test checks")
        big = snapshot("big", 1, size=codec.max_snapshot_bytes + 1)
        with pytest.raises(CheckpointTooLargeError, match="over the limit"):
            await store.write_snapshot(big)
        assert await store.list_snapshots("run-1") == []

    async def test_snapshot_of_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.write_snapshot(snapshot("s1", 0, run_id="ghost"))

    async def test_unsafe_snapshot_id_is_refused(self, store: Store) -> None:
        await store.create_run(manifest())
        with pytest.raises(InvalidNameError, match="checkpoint id"):
            await store.write_snapshot(snapshot("../x", 0))
