"""A file store's snapshots: files whose names list them, and older ones the manifest lists.

Each run's ``snapshots`` folder lists itself (:class:`SnapshotFolder`; the
naming scheme is in :mod:`actorflow.storage._snapshot_names`):
:class:`SnapshotFiles` writes, reads, lists, syncs and deletes through it, and
through the manifest for snapshots written the older way.

A snapshot is off the durability path (the log is what makes a run durable):
it is written to a temp file and renamed into place, so a reader never sees
half of it, but nothing is fsynced. Its name ends in ``~unsynced`` until
``sync`` fsyncs it, renames it without the mark and fsyncs the folder, so the
listing says which snapshots a power loss cannot take (``durable``).
Deleting is an unlink without a folder fsync: a deletion a power loss undoes
brings back a snapshot retention had no need of (see ``_retention``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import anyio
import msgspec

from actorflow.errors import (
    CheckpointNotFoundError,
)
from actorflow.storage._manifests import (
    add_snapshot,
    live_snapshots,
    mark_snapshot,
    snapshot_info,
)
from actorflow.storage._records import SnapshotStatus
from actorflow.storage._snapshot_names import SUFFIX, SnapshotNames, listed_names
from actorflow.storage.file._fs import remake_folder, remove_file, write_atomic

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._records import RunManifest, Snapshot, SnapshotInfo
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._fs import FileSystem
    from actorflow.storage.file._layout import RunFolders
    from actorflow.storage.file._manifests import ManifestFiles

__all__ = ["UNSYNCED", "SnapshotFiles", "SnapshotFolder"]

UNSYNCED = "~unsynced"

_KNOWN_RUNS = 256
"""Runs whose snapshot ids a store remembers (each costs one folder listing to learn)."""
"""What a snapshot file's name ends with (before its suffix) until it is synced."""


def _unsynced(name: str) -> str:
    return f"{name[: -len(SUFFIX)]}{UNSYNCED}{SUFFIX}"


def _synced(name: str) -> str:
    return f"{name[: -len(SUFFIX) - len(UNSYNCED)]}{SUFFIX}"


def _is_unsynced(name: str) -> bool:
    return name.endswith(UNSYNCED + SUFFIX)


class SnapshotFolder:
    """The self-listing snapshots of run ``run_id``, in ``path``. Called from worker threads."""

    def __init__(self, fs: FileSystem, path: str, run_id: str, names: SnapshotNames) -> None:
        self.fs = fs
        self.path = path
        self.run_id = run_id
        self.names = names

    def parse(self, name: str) -> SnapshotInfo | None:
        """The entry ``name`` carries; None for a file that is not a self-listing snapshot."""
        if not _is_unsynced(name):
            return self.names.parse(self.run_id, name)
        info = self.names.parse(self.run_id, _synced(name))
        return None if info is None else msgspec.structs.replace(info, durable=False)

    def entries(self) -> dict[str, tuple[str, SnapshotInfo]]:
        """``{snapshot id: (file name, entry)}``; of two files with one id, the newer."""
        found: dict[str, tuple[str, SnapshotInfo]] = {}
        for name in self.fs.listdir(self.path):
            info = self.parse(name)
            if info is None:
                continue
            seen = found.get(info.snapshot_id)
            if seen is None or (seen[1].created, seen[0]) < (info.created, name):
                found[info.snapshot_id] = (name, info)
        return found

    def named(self, snapshot_id: str) -> list[str]:
        """The files of one snapshot id (usually one), without parsing every name."""
        return self.find(snapshot_id)[0]

    def find(self, snapshot_id: str) -> tuple[list[str], bool]:
        """The self-listing files of one id, and whether an older-style file may hold it.

        A snapshot the manifest lists (written the older way) is named
        ``..._<id>.ckpt``; a folder with no such name spares the caller a read
        of the manifest, which every new snapshot's write would otherwise pay.
        """
        # an id sits between the phase's "_" and the first "~" (neither can be in it)
        marker, older = f"_{snapshot_id}~", f"_{snapshot_id}{SUFFIX}"
        names = self.fs.listdir(self.path)
        own = [
            name
            for name in names
            if marker in name
            and (info := self.parse(name)) is not None
            and info.snapshot_id == snapshot_id
        ]
        return own, any(name.endswith(older) for name in names)

    def newest(self, names: list[str]) -> str:
        """Of several files of one id, the one written last.

        (Of one snapshot's two names, left by a power loss in the middle of
        its sync, the unsynced one: the same bytes, and the safer claim.)
        """

        def created(name: str) -> tuple[float, str]:
            info = self.parse(name)
            return (info.created if info is not None else 0.0, name)

        return max(names, key=created)

    def write(self, name: str, sealed: bytes) -> None:
        """Write one snapshot, whole or not at all, without a sync (named unsynced)."""
        path = os.path.join(self.path, _unsynced(name))
        try:
            write_atomic(self.fs, path, sealed, durable=False)
        except FileNotFoundError:
            remake_folder(self.fs, self.path)
            write_atomic(self.fs, path, sealed, durable=False)

    def sync(self, snapshot_ids: Sequence[str]) -> list[str]:
        """Make the self-listing snapshots ``snapshot_ids`` durable; return the ids not here.

        Each unsynced file is fsynced and renamed without its mark, then the
        folder is fsynced once. A power loss before that brings back either
        name, on the same synced bytes.
        """
        by_id: dict[str, list[str]] = {}
        for name in self.fs.listdir(self.path):
            info = self.parse(name)
            if info is not None:
                by_id.setdefault(info.snapshot_id, []).append(name)
        renamed = False
        for name in (n for sid in dict.fromkeys(snapshot_ids) for n in by_id.get(sid, ())):
            if _is_unsynced(name):
                path, synced = os.path.join(self.path, name), os.path.join(self.path, _synced(name))
                self.fs.sync_file(path)
                if self.fs.exists(synced):
                    # one file under both names (a sync a power loss cut short):
                    # a rename between two links of one file would do nothing
                    self.fs.unlink(path)
                else:
                    self.fs.rename(path, synced)
                renamed = True
        if renamed:
            self.fs.fsync_dir(self.path)
        return [sid for sid in snapshot_ids if sid not in by_id]

    def remove(self, snapshot_id: str) -> int | None:
        """Delete a snapshot (not synced: see the module); its size, or None if it is absent."""
        doomed = self.named(snapshot_id)
        if not doomed:
            return None
        freed = 0
        for n in doomed:
            path = os.path.join(self.path, n)
            try:
                freed += self.fs.size(path)
            except FileNotFoundError:
                continue
            self.fs.unlink(path)
        return freed


class SnapshotFiles:
    """The runs' snapshots under ``folders``; listed-the-older-way ones through ``manifests``.

    ``write`` is async (its worker-thread hops are its own); the other methods
    block and the store calls them from worker threads.
    """

    def __init__(self, folders: RunFolders, manifests: ManifestFiles, codec: Codec) -> None:
        self._folders = folders
        self._fs = folders.fs
        self._manifests = manifests
        self._codec = codec
        self._names = SnapshotNames(codec)
        # run id -> the snapshot ids its folder held when this store first wrote
        # there, plus those written since: a new id (the usual case) is then
        # written without listing a folder that grows with the run. None: the
        # folder has snapshots the manifest lists, so every write looks.
        self._known: dict[str, set[str] | None] = {}

    async def write(
        self, snapshot: Snapshot, update: Callable[[RunManifest], RunManifest] | None
    ) -> SnapshotInfo:
        """Write a snapshot (ids already checked); see ``FileStore.write_snapshot``."""
        if update is None:
            return await self._folders.call("write checkpoint", self._seal_and_write, snapshot)
        if self._names_itself(snapshot):
            return await self._write_with_update(snapshot, update)
        sealed, raw = self._codec.dump_snapshot(snapshot)
        info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
        await self._folders.call(
            "write checkpoint", self._write_listed, info, snapshot, sealed, update
        )
        return info

    def _seal_and_write(self, snapshot: Snapshot) -> SnapshotInfo:
        # The thread trip is paid anyway; zstd and sha256 let go of the GIL
        # for large buffers, so a big state compresses beside the loop.
        sealed, raw = self._codec.dump_snapshot(snapshot)
        info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
        name = self._names.entry(snapshot.run_id, info)
        if name is None:
            self._write_listed(info, snapshot, sealed, None)
            return info
        return msgspec.structs.replace(info, durable=self._write_named(snapshot, name, sealed))

    async def _write_with_update(
        self, snapshot: Snapshot, update: Callable[[RunManifest], RunManifest]
    ) -> SnapshotInfo:
        run_id = snapshot.run_id
        failures: dict[str, Exception] = {}
        done: dict[str, object] = {}

        async def attempt(what: str, fn: Callable[..., object], *args: Any) -> None:
            try:
                done[what] = await self._folders.call(what, fn, *args)
            except Exception as exc:
                failures[what] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, "write checkpoint", self._seal_and_write, snapshot)
            tg.start_soon(attempt, "update run", self._manifests.change, run_id, update)
        if "update run" in failures and "write checkpoint" not in failures:
            # not acknowledged, so not listed either
            with anyio.CancelScope(shield=True):
                await self._folders.call(
                    "write checkpoint", self._folder(run_id).remove, snapshot.snapshot_id
                )
        if failures:
            raise next(iter(failures.values()))
        return cast("SnapshotInfo", done["write checkpoint"])

    def _write_named(self, snapshot: Snapshot, name: str, sealed: bytes) -> bool:
        """Write it (unsynced) unless it is there; whether it is durable."""
        # a write would make the folders of a run that does not exist (or no longer does)
        self._folders.require(snapshot.run_id)
        known = self._known_ids(snapshot.run_id)
        taken = None
        if known is None or snapshot.snapshot_id in known:
            taken = self._taken(snapshot)
        if taken is None:
            self._folder(snapshot.run_id).write(name, sealed)
            if known is not None:
                known.add(snapshot.snapshot_id)
            return False
        return taken

    def _known_ids(self, run_id: str) -> set[str] | None:
        """The ids the run's folder may hold (a superset), from one listing per run."""
        if run_id in self._known:
            return self._known[run_id]
        folder = self._folder(run_id)
        try:
            names = self._fs.listdir(folder.path)
        except FileNotFoundError:
            names = []
        ids: set[str] = set()
        known: set[str] | None = ids
        for name in names:
            info = folder.parse(name)
            if info is not None:
                ids.add(info.snapshot_id)
            elif name.endswith(SUFFIX):
                known = None  # written the older way: only the manifest knows its id
                break
        if len(self._known) >= _KNOWN_RUNS:
            del self._known[next(iter(self._known))]  # the run written to longest ago
        self._known[run_id] = known
        return known

    def _taken(self, snapshot: Snapshot) -> bool | None:
        """Whether the snapshot's id is written already (by this very snapshot).

        None if it is not; else whether that copy is durable.

        Raises:
            StorageError: the id holds a different snapshot (ids are written once).
        """
        run_id, snapshot_id = snapshot.run_id, snapshot.snapshot_id
        try:
            path = self._snapshot_path(run_id, snapshot_id)
            data = self._fs.read(path)
        except (CheckpointNotFoundError, FileNotFoundError):
            return None
        self._codec.require_same_snapshot(data, snapshot, location=path)
        return not _is_unsynced(os.path.basename(path))

    def _write_listed(
        self,
        info: SnapshotInfo,
        snapshot: Snapshot,
        sealed: bytes,
        update: Callable[[RunManifest], RunManifest] | None,
    ) -> None:
        """The older way, for an entry too long for a file name: the manifest lists it."""
        run_id = snapshot.run_id
        self._known[run_id] = None  # its id is in the manifest now, not in the folder's names
        if self._taken(snapshot) is not None:
            if update is not None:
                self._manifests.change(run_id, update)
            return
        path = self._folders.run(run_id, "snapshots", self._names.listed(info))
        # durable, as it always was: the manifest will name it
        write_atomic(self._fs, path, sealed)
        listed = (
            (lambda m: add_snapshot(m, info))
            if update is None
            else (lambda m: update(add_snapshot(m, info)))
        )
        self._manifests.change(run_id, listed)

    def _folder(self, run_id: str) -> SnapshotFolder:
        return SnapshotFolder(self._fs, self._folders.run(run_id, "snapshots"), run_id, self._names)

    def _names_itself(self, snapshot: Snapshot) -> bool:
        """Whether the snapshot's entry fits a file name, whatever its sizes turn out to be."""
        probe = snapshot_info(snapshot, stored_size=_LARGEST, raw_size=_LARGEST)
        return self._names.entry(snapshot.run_id, probe) is not None

    def _snapshot_path(self, run_id: str, snapshot_id: str) -> str:
        self._folders.require(run_id)
        folder = self._folder(run_id)
        named, maybe_listed = folder.find(snapshot_id)
        if named:  # of two (a crash between writes of one id), the newer
            return self._folders.run(run_id, "snapshots", folder.newest(named))
        if maybe_listed:
            return self._listed_path(run_id, snapshot_id)
        raise CheckpointNotFoundError(run_id, snapshot_id)

    def _listed_path(self, run_id: str, snapshot_id: str) -> str:
        """Where a snapshot the manifest lists (written the older way) lives."""
        for info in live_snapshots(self._manifests.read(run_id)):
            if info.snapshot_id == snapshot_id:
                # sealed or not, as the store that wrote it was
                paths = [self._folders.run(run_id, "snapshots", n) for n in listed_names(info)]
                return next((p for p in paths if self._fs.exists(p)), paths[-1])
        raise CheckpointNotFoundError(run_id, snapshot_id)

    def read(self, run_id: str, snapshot_id: str) -> Snapshot:
        """The snapshot, verified and decoded."""
        path = self._snapshot_path(run_id, snapshot_id)
        try:
            data = self._fs.read(path)
        except FileNotFoundError:
            # synced meanwhile (renamed without its mark), or deleted: look again once
            path = self._snapshot_path(run_id, snapshot_id)
            try:
                data = self._fs.read(path)
            except FileNotFoundError:
                raise CheckpointNotFoundError(run_id, snapshot_id) from None
        return self._codec.load_snapshot(
            data, run_id=run_id, snapshot_id=snapshot_id, location=path
        )

    def sync(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """Make snapshots durable; those the manifest lists are already.

        Raises:
            CheckpointNotFoundError: one of them does not exist.
        """
        self._folders.require(run_id)
        missing = self._folder(run_id).sync(snapshot_ids)
        if missing:
            listed = {s.snapshot_id for s in live_snapshots(self._manifests.read(run_id))}
            for snapshot_id in missing:
                if snapshot_id not in listed:
                    raise CheckpointNotFoundError(run_id, snapshot_id)

    def entries(self, run_id: str) -> list[SnapshotInfo]:
        """The run's snapshots: the folder's names, and older manifest entries."""
        listed = {s.snapshot_id: s for s in live_snapshots(self._manifests.read(run_id))}
        listed.update((sid, info) for sid, (_, info) in self._folder(run_id).entries().items())
        return sorted(listed.values(), key=lambda s: (s.position, s.created, s.snapshot_id))

    def delete(self, run_id: str, snapshot_id: str) -> int:
        """Delete a snapshot (an unlink, or a manifest change first); bytes freed."""
        self._folders.require(run_id)
        freed = self._folder(run_id).remove(snapshot_id) or 0
        try:
            path = self._listed_path(run_id, snapshot_id)
        except CheckpointNotFoundError:
            return freed
        self._manifests.change(
            run_id, lambda m: mark_snapshot(m, snapshot_id, SnapshotStatus.DELETED)
        )
        return freed + remove_file(self._fs, path)


_LARGEST = 10**15  # bytes: more digits than any snapshot's sizes will have
