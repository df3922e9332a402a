"""A file store's manifests: one file per run, read, changed under flock and replaced atomically.

Every method blocks: the store calls them from worker threads.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING

from actorflow.errors import RunNotFoundError, StorageError
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage.file._fs import write_atomic
from actorflow.storage.file._layout import RUN_PARTS

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._records import RunManifest
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["ManifestFiles"]


class ManifestFiles:
    """The runs' manifests under ``folders``, sealed by ``codec``."""

    def __init__(self, folders: RunFolders, codec: Codec) -> None:
        self._folders = folders
        self._fs = folders.fs
        self._codec = codec

    def read(self, run_id: str) -> RunManifest:
        """The run's manifest.

        Raises:
            RunNotFoundError: no such run.
            CorruptedDataError: the manifest is damaged.
        """
        path = self._folders.run(run_id, "manifest")
        try:
            data = self._fs.read(path)
        except FileNotFoundError:
            raise RunNotFoundError(run_id) from None
        return self._codec.load_manifest(data, run_id=run_id, location=path)

    def _write(self, manifest: RunManifest) -> None:
        path = self._folders.run(manifest.run_id, "manifest")
        write_atomic(self._fs, path, self._codec.dump_manifest(manifest))

    def change(self, run_id: str, change: Callable[[RunManifest], RunManifest]) -> RunManifest:
        """Read, change and write the manifest as one step across threads and processes."""
        # flock on a side file makes read-change-write atomic across threads and processes
        exists = self._folders.exists(run_id)
        handle = self._fs.lock(self._folders.run(run_id, "manifest.lock")) if exists else None
        if handle is None:
            raise RunNotFoundError(run_id)
        try:
            new = change(self.read(run_id))
            if new.run_id != run_id:
                raise StorageError("update run", f"change() may not rename run {run_id!r}")
            self._write(new)
            return new
        finally:
            self._fs.unlock(handle)

    def create(self, run_id: str, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Make the run's folders and its manifest, unless it exists: ``(stored, created)``."""
        if self._folders.exists(run_id):
            return self.read(run_id), False
        self._fs.makedirs(self._folders.run(run_id))
        for sub in RUN_PARTS:
            # made durable by the run folder's fsync that commits the manifest
            self._fs.mkdir(self._folders.run(run_id, sub))
        data = self._codec.dump_manifest(manifest)
        path = self._folders.run(run_id, "manifest")
        if not write_atomic(self._fs, path, data, exclusive=True):
            return self.read(run_id), False
        return manifest, True

    def read_all(self) -> list[RunManifest]:
        """Every run's manifest, in no particular order."""
        found = []
        for name in self._fs.listdir(self._folders.root):
            if name.startswith(".") or not self._folders.exists(name):
                continue
            found.append(self.read(name))
        return found

    def delete_run(self, run_id: str, tombstone: bool) -> int:
        """Delete the run's data (all of it, or all but a tombstone manifest); bytes freed."""
        self._folders.require(run_id)
        if tombstone:
            self.change(run_id, make_tombstone)
            doomed = [self._folders.run(run_id, sub) for sub in RUN_PARTS]
        else:
            doomed = [self._folders.run(run_id)]
        freed = 0
        for folder in doomed:
            # Renamed away first, so a crash midway never leaves half a run looking whole.
            trash = os.path.join(self._folders.root, f".trash-{secrets.token_hex(8)}")
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
