"""A file store's manifests: one file per run, read, changed under flock and replaced atomically.

A change that need not be durable (``durable=False``: a finished run's end,
which its log already holds, or a recovery's take of a run, which its claim
makes safe to lose) goes to a second file, ``manifest.unsynced``,
written without any fsync, and never over the durable ``manifest``: a power
loss may take it or leave it torn, and the reader then falls back to the
durable one, whole. While it exists and verifies it is the newer of the two,
because every durable write removes it first, with the folder fsync that
makes the removal stick.

Every method blocks: the store calls them from worker threads.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import TYPE_CHECKING

from actorflow.errors import (
    CorruptedDataError,
    EncryptionKeyError,
    InvalidRunIdError,
    RunFolderNotEmptyError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage._manifests import (
    corrupt_manifest,
    data_without_manifest,
    encrypted_manifest,
    not_a_run,
)
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage._records import validate_run_id
from actorflow.storage.file._fs import TRASH_PREFIX, write_atomic
from actorflow.storage.file._index import UnfinishedMarks
from actorflow.storage.file._layout import LAZY_PARTS, RUN_PARTS

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._records import RunManifest
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["RECENT", "ManifestFiles"]

RECENT = 2.0
"""Seconds within which a folder's change time is no version: the file system's clock
ticks coarsely (milliseconds), and two writes in one tick leave the same time."""

_UNSYNCED = "manifest.unsynced"


class ManifestFiles:
    """The runs' manifests under ``folders``, sealed by ``codec``."""

    def __init__(self, folders: RunFolders, codec: Codec) -> None:
        self._folders = folders
        self._fs = folders.fs
        self._codec = codec
        self.unfinished = UnfinishedMarks(folders.fs, folders.root)

    def read(self, run_id: str) -> RunManifest:
        """The run's manifest: the unsynced one if it is there whole, else the durable one.

        Raises:
            RunNotFoundError: no such run.
            CorruptedDataError: the (durable) manifest is damaged.
        """
        newer = self._read_unsynced(run_id)
        if newer is not None:
            return newer
        path = self._folders.run(run_id, "manifest")
        try:
            data = self._fs.read(path)
        except FileNotFoundError:
            raise RunNotFoundError(run_id) from None
        return self._codec.load_manifest(data, run_id=run_id, location=path)

    def _read_unsynced(self, run_id: str) -> RunManifest | None:
        path = self._folders.run(run_id, _UNSYNCED)
        try:
            return self._codec.load_manifest(self._fs.read(path), run_id=run_id, location=path)
        except FileNotFoundError:
            return None
        except CorruptedDataError:
            # what a power loss left of it (or no file at all: a FIFO put there):
            # the durable manifest is older, whole
            return None

    def _write(self, manifest: RunManifest, *, durable: bool = True) -> None:
        if not durable:
            unsynced = self._folders.run(manifest.run_id, _UNSYNCED)
            write_atomic(self._fs, unsynced, self._codec.dump_manifest(manifest), durable=False)
            return
        self._drop_unsynced(manifest.run_id)
        path = self._folders.run(manifest.run_id, "manifest")
        write_atomic(self._fs, path, self._codec.dump_manifest(manifest))

    def _drop_unsynced(self, run_id: str) -> None:
        # Removed durably before the durable manifest replaces the old one: a
        # power loss in between may lose the unsynced change (only ever a run's
        # end, which its log repairs, or a take, which the claim made safe to
        # lose) but never leaves it beside, and read before, a newer durable one.
        path = self._folders.run(run_id, _UNSYNCED)
        if self._fs.exists(path):
            self._fs.unlink(path)
            self._fs.fsync_dir(self._folders.run(run_id))

    def change(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], durable: bool = True
    ) -> RunManifest:
        """Read, change and write the manifest as one step across threads and processes."""
        # flock on a side file makes read-change-write atomic across threads and processes
        if not self._folders.exists(run_id):
            raise RunNotFoundError(run_id)
        try:
            handle = self._fs.lock(self._folders.run(run_id, "manifest.lock"))
        except FileNotFoundError:  # its folder went while we waited: deleted meanwhile
            raise RunNotFoundError(run_id) from None
        try:
            old = self.read(run_id)
            new = change(old)
            if new.run_id != run_id:
                raise StorageError("update run", f"change() may not rename run {run_id!r}")
            if old.status.finished and not new.status.finished:
                self.unfinished.add(run_id)  # before the manifest, as at creation
            self._write(new, durable=durable)
            if new.status.finished and not old.status.finished:
                self.unfinished.remove(run_id)
            return new
        finally:
            self._fs.unlock(handle)

    def create(self, run_id: str, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Make the run's folders and its manifest, unless it exists: ``(stored, created)``."""
        if self._folders.exists(run_id):
            return self.read(run_id), False
        if self._has_data(run_id):
            if self._folders.exists(run_id):  # another creator got there first and wrote
                return self.read(run_id), False
            # an earlier run's data: its snapshot ids and log would mix with the new run's
            raise RunFolderNotEmptyError(run_id, self._folders.run(run_id))
        self._fs.makedirs(self._folders.run(run_id))
        for sub in RUN_PARTS:
            # made durable by the run folder's fsync that commits the manifest
            self._fs.mkdir(self._folders.run(run_id, sub))
        data = self._codec.dump_manifest(manifest)
        path = self._folders.run(run_id, "manifest")
        if not manifest.status.finished:
            self.unfinished.add(run_id)
        if not write_atomic(self._fs, path, data, exclusive=True):
            return self.read(run_id), False
        return manifest, True

    def read_all(self) -> tuple[list[RunManifest], list[UnreadableEntry]]:
        """Every run's manifest (in no particular order), and what is not a readable run."""
        found: list[RunManifest] = []
        unreadable: list[UnreadableEntry] = []
        for name in self._fs.listdir(self._folders.root):
            if name.startswith("."):
                continue  # the store's own temp files and trash (run ids never start with .)
            path = os.path.join(self._folders.root, name)
            try:
                validate_run_id(name)
            except InvalidRunIdError:
                unreadable.append(not_a_run(path))
                continue
            if not self._folders.exists(name):
                if not self._fs.is_dir(path):
                    unreadable.append(not_a_run(path))
                elif self._has_data(name):
                    unreadable.append(data_without_manifest(name, path))
                # else: empty folders of a creation that crashed; create_run reuses them
                continue
            try:
                found.append(self.read(name))
            except CorruptedDataError as exc:
                unreadable.append(corrupt_manifest(name, exc))
            except EncryptionKeyError as exc:
                where = self._folders.run(name, "manifest")
                unreadable.append(encrypted_manifest(name, where, exc))
            except RunNotFoundError:
                pass  # deleted while we listed
        return found, unreadable

    def versions(self) -> dict[str, str]:
        """Each run folder's change time, ``""`` for a recent one (see ``list_run_versions``)."""
        recent = time.time() - RECENT
        root = self._folders.root
        modified, join = self._fs.modified, os.path.join  # once per run: ten thousand times
        found: dict[str, str] = {}
        for name in self._fs.listdir(root):
            if name.startswith("."):
                continue
            try:
                changed = modified(join(root, validate_run_id(name)))
            except (InvalidRunIdError, FileNotFoundError):
                continue  # no run (list_unreadable names it), or deleted meanwhile
            found[name] = "" if changed >= recent else changed.hex()
        return found

    def _has_data(self, run_id: str) -> bool:
        """Whether the run's folder holds traces of a run: anything but its empty parts.

        A creation writes nothing else before the manifest (but its temp file, a
        dot-name); a run's log, blobs, snapshots, lock and owner files come after.
        """
        names = [n for n in self._fs.listdir(self._folders.run(run_id)) if not n.startswith(".")]
        if any(n not in RUN_PARTS for n in names):
            return True
        return any(self._fs.listdir(self._folders.run(run_id, sub)) for sub in names)

    def delete_run(self, run_id: str, tombstone: bool) -> int:
        """Delete the run's data (all of it, or all but a tombstone manifest); bytes freed."""
        self._folders.require(run_id)
        self.unfinished.remove(run_id)
        if tombstone:
            self.change(run_id, make_tombstone)
            doomed = [self._folders.run(run_id, sub) for sub in RUN_PARTS]
            # made again on their first use, if ever, like in a run that never used them
            lazy = (self._folders.run(run_id, sub) for sub in LAZY_PARTS)
            doomed += [folder for folder in lazy if self._fs.is_dir(folder)]
        else:
            doomed = [self._folders.run(run_id)]
        freed = 0
        for folder in doomed:
            # Renamed away first, so a crash midway never leaves half a run looking whole.
            trash = os.path.join(self._folders.root, f"{TRASH_PREFIX}{secrets.token_hex(8)}")
            freed += self._tree_size(folder)
            self._fs.rename(folder, trash)
            self._fs.fsync_dir(os.path.dirname(folder))
            self._fs.remove_tree(trash)
        if tombstone:
            for sub in RUN_PARTS:
                self._fs.makedirs(self._folders.run(run_id, sub))
        return freed

    def _tree_size(self, path: str) -> int:
        if not self._fs.is_dir(path):  # a file, or a link: counted as itself, never followed
            try:
                return self._fs.size(path)
            except FileNotFoundError:
                return 0
        return sum(self._tree_size(os.path.join(path, n)) for n in self._fs.listdir(path))
