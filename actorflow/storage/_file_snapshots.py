"""FileStore's snapshots: files whose names list them, and older ones the manifest lists.

A mixin of :class:`~actorflow.storage._file.FileStore`; the naming scheme and
the folder itself are in :mod:`actorflow.storage._snapfiles`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from actorflow.errors import (
    CheckpointNotFoundError,
    CorruptedDataError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage._fs import write_atomic
from actorflow.storage._manifests import (
    add_snapshot,
    live_snapshots,
    mark_snapshot,
    snapshot_file_name,
    snapshot_info,
    validate_snapshot_id,
)
from actorflow.storage._records import SnapshotStatus, validate_run_id
from actorflow.storage._snapfiles import SnapshotFolder, entry_name, parse_entry

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._codec import Codec
    from actorflow.storage._fs import FileSystem
    from actorflow.storage._records import RunManifest, Snapshot, SnapshotInfo

__all__ = ["FileSnapshots"]

T = TypeVar("T")


class FileSnapshots:
    """The snapshot methods of ``FileStore``, which provides what is declared here."""

    if TYPE_CHECKING:
        fs: FileSystem
        codec: Codec

        async def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T: ...
        def _dir(self, run_id: str, *parts: str) -> str: ...
        def _exists(self, run_id: str) -> bool: ...
        def _read_manifest(self, run_id: str) -> RunManifest: ...
        def _change_manifest(
            self, run_id: str, change: Callable[[RunManifest], RunManifest]
        ) -> RunManifest: ...
        def _remove(self, path: str) -> int: ...

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """See :meth:`Store.write_snapshot`: one durable file whose name lists it.

        The manifest is rewritten only for ``update`` or for an entry too long
        for a file name (the older way: listed there). A file that lists itself
        does not depend on the manifest, so with ``update`` both are written at
        once, in two worker threads (their fsyncs can share a journal commit).
        The snapshot is encoded, compressed and sealed in the worker thread
        that writes it, off the event loop.
        """
        validate_run_id(snapshot.run_id)
        validate_snapshot_id(snapshot.snapshot_id)
        if update is None:
            return await self._call("write checkpoint", self._seal_and_write, snapshot)
        if _names_itself(snapshot):
            return await self._write_with_update(snapshot, update)
        sealed, raw = self.codec.dump_snapshot(snapshot)
        info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
        await self._call("write checkpoint", self._write_listed, info, snapshot, sealed, update)
        return info

    def _seal_and_write(self, snapshot: Snapshot) -> SnapshotInfo:
        # The thread trip is paid anyway; zstd and sha256 let go of the GIL
        # for large buffers, so a big state compresses beside the loop.
        sealed, raw = self.codec.dump_snapshot(snapshot)
        info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
        name = entry_name(info)
        if name is None:
            self._write_listed(info, snapshot, sealed, None)
        else:
            self._write_named(snapshot, name, sealed)
        return info

    async def _write_with_update(
        self, snapshot: Snapshot, update: Callable[[RunManifest], RunManifest]
    ) -> SnapshotInfo:
        run_id = snapshot.run_id
        failures: dict[str, Exception] = {}
        done: dict[str, object] = {}

        async def attempt(what: str, fn: Callable[..., object], *args: Any) -> None:
            try:
                done[what] = await self._call(what, fn, *args)
            except Exception as exc:
                failures[what] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, "write checkpoint", self._seal_and_write, snapshot)
            tg.start_soon(attempt, "update run", self._change_manifest, run_id, update)
        if "update run" in failures and "write checkpoint" not in failures:
            # not acknowledged, so not listed either
            with anyio.CancelScope(shield=True):
                await self._call(
                    "write checkpoint", self._snapshots(run_id).remove, snapshot.snapshot_id
                )
        if failures:
            raise next(iter(failures.values()))
        return cast("SnapshotInfo", done["write checkpoint"])

    def _write_named(self, snapshot: Snapshot, name: str, sealed: bytes) -> None:
        if not self._taken(snapshot):
            self._snapshots(snapshot.run_id).write(name, sealed)

    def _taken(self, snapshot: Snapshot) -> bool:
        """Whether the snapshot's id is written already (by this very snapshot).

        Raises:
            StorageError: the id holds a different snapshot (ids are written once).
        """
        run_id, snapshot_id = snapshot.run_id, snapshot.snapshot_id
        try:
            path = self._snapshot_path(run_id, snapshot_id)
            data = self.fs.read(path)
        except (CheckpointNotFoundError, FileNotFoundError):
            return False
        try:
            same = snapshot == self.codec.load_snapshot(
                data, run_id=run_id, snapshot_id=snapshot_id, location=path
            )
        except CorruptedDataError:
            same = False
        if not same:
            raise StorageError(
                "write checkpoint",
                f"{path} already holds a different checkpoint with id {snapshot_id!r}; "
                "checkpoint ids must be unique within a run",
            )
        return True

    def _write_listed(
        self,
        info: SnapshotInfo,
        snapshot: Snapshot,
        sealed: bytes,
        update: Callable[[RunManifest], RunManifest] | None,
    ) -> None:
        """The older way, for an entry too long for a file name: the manifest lists it."""
        run_id = snapshot.run_id
        if self._taken(snapshot):
            if update is not None:
                self._change_manifest(run_id, update)
            return
        write_atomic(self.fs, self._dir(run_id, "snapshots", snapshot_file_name(info)), sealed)
        listed = (
            (lambda m: add_snapshot(m, info))
            if update is None
            else (lambda m: update(add_snapshot(m, info)))
        )
        self._change_manifest(run_id, listed)

    def _snapshots(self, run_id: str) -> SnapshotFolder:
        return SnapshotFolder(self.fs, self._dir(run_id, "snapshots"))

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """See :meth:`Store.read_snapshot`."""
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        return await self._call("read checkpoint", self._read_snapshot, run_id, snapshot_id)

    def _snapshot_path(self, run_id: str, snapshot_id: str) -> str:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        named, maybe_listed = self._snapshots(run_id).find(snapshot_id)
        if named:  # of two (a crash between writes of one id), the newer
            return self._dir(run_id, "snapshots", max(named, key=_created))
        if maybe_listed:
            return self._listed_path(run_id, snapshot_id)
        raise CheckpointNotFoundError(run_id, snapshot_id)

    def _listed_path(self, run_id: str, snapshot_id: str) -> str:
        """Where a snapshot the manifest lists (written the older way) lives."""
        for info in live_snapshots(self._read_manifest(run_id)):
            if info.snapshot_id == snapshot_id:
                return self._dir(run_id, "snapshots", snapshot_file_name(info))
        raise CheckpointNotFoundError(run_id, snapshot_id)

    def _read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        path = self._snapshot_path(run_id, snapshot_id)
        try:
            data = self.fs.read(path)
        except FileNotFoundError:
            raise CheckpointNotFoundError(run_id, snapshot_id) from None
        return self.codec.load_snapshot(data, run_id=run_id, snapshot_id=snapshot_id, location=path)

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """See :meth:`Store.list_snapshots`: the folder's names, and older manifest entries."""
        validate_run_id(run_id)
        return await self._call("list checkpoints", self._list_snapshots, run_id)

    def _list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        listed = {s.snapshot_id: s for s in live_snapshots(self._read_manifest(run_id))}
        listed.update((sid, info) for sid, (_, info) in self._snapshots(run_id).entries().items())
        return sorted(listed.values(), key=lambda s: (s.position, s.created, s.snapshot_id))

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """See :meth:`Store.delete_snapshot`: an unlink and a folder fsync.

        A snapshot the manifest lists (written the older way) leaves it first.
        """
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        return await self._call("delete checkpoint", self._delete_snapshot, run_id, snapshot_id)

    def _delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        freed = self._snapshots(run_id).remove(snapshot_id) or 0
        try:
            path = self._listed_path(run_id, snapshot_id)
        except CheckpointNotFoundError:
            return freed
        self._change_manifest(
            run_id, lambda m: mark_snapshot(m, snapshot_id, SnapshotStatus.DELETED)
        )
        return freed + self._remove(path)


_LARGEST = 10**15  # bytes: more digits than any snapshot's sizes will have


def _names_itself(snapshot: Snapshot) -> bool:
    """Whether the snapshot's entry fits a file name, whatever its sizes turn out to be."""
    probe = snapshot_info(snapshot, stored_size=_LARGEST, raw_size=_LARGEST)
    return entry_name(probe) is not None


def _created(name: str) -> tuple[float, str]:
    info = parse_entry(name)
    return (info.created if info is not None else 0.0, name)
