"""A file store's blobs: content-addressed files under each run, written once.

Every method blocks: the store calls them from worker threads.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from actorflow.errors import RunNotFoundError, StorageError
from actorflow.storage._manifests import blob_addresses
from actorflow.storage.file._fs import remake_folder, remove_file, write_atomic

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["BlobFiles"]


class BlobFiles:
    """The runs' blobs under ``folders``, sealed by ``codec``."""

    def __init__(self, folders: RunFolders, codec: Codec) -> None:
        self._folders = folders
        self._fs = folders.fs
        self._codec = codec

    def path(self, run_id: str, address: str) -> str:
        """Where the blob at ``address`` lives (the address not checked here)."""
        return self._folders.run(run_id, "blobs", address)

    def put(self, run_id: str, data: bytes, durable: bool = True) -> str:
        """Store ``data`` unless stored already; return its address.

        Without ``durable`` no fsync is made: ``sync`` makes it durable later.
        """
        # Addressed and sealed here, in the worker thread: sha256 and zstd let
        # go of the GIL for large states, so the loop runs on meanwhile, and a
        # blob stored already is not compressed again.
        address = self._codec.blob_address(data)
        self._folders.require(run_id)
        path = self.path(run_id, address)
        if not self._fs.exists(path):
            sealed = self._codec.seal_blob(data, run_id=run_id, address=address)
            try:
                write_atomic(self._fs, path, sealed, durable=durable)
            except FileNotFoundError:
                remake_folder(self._fs, os.path.dirname(path))
                write_atomic(self._fs, path, sealed, durable=durable)
        return address

    def sync(self, run_id: str, addresses: list[str]) -> None:
        """Make the blobs at ``addresses`` durable: an fsync each, one of the folder.

        Raises:
            RunNotFoundError: no such run.
            StorageError: the run has no such blob.
        """
        self._folders.require(run_id)
        for address in addresses:
            try:
                self._fs.sync_file(self.path(run_id, address))
            except FileNotFoundError:
                raise StorageError("sync blob", f"run {run_id!r} has no blob {address!r}") from None
        if addresses:
            self._fs.fsync_dir(self._folders.run(run_id, "blobs"))

    def get(self, run_id: str, ref: str, path: str) -> bytes:
        """The blob ``ref`` at ``path``, verified.

        Raises:
            RunNotFoundError: no such run.
            StorageError: the run has no such blob.
        """
        try:
            data = self._fs.read(path)
        except FileNotFoundError:
            if not self._folders.exists(run_id):
                raise RunNotFoundError(run_id) from None
            raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}") from None
        return self._codec.load_blob(data, run_id=run_id, address=ref, location=path)

    def exists(self, path: str) -> bool:
        """Whether the blob at ``path`` exists."""
        return self._fs.exists(path)

    def addresses(self, run_id: str) -> list[str]:
        """The addresses of the run's blobs; foreign files are skipped with a warning."""
        folder = self._folders.run(run_id, "blobs")
        names = [n for n in self._fs.listdir(folder) if not n.startswith(".")]  # temp files
        return blob_addresses(names, folder)

    def delete(self, path: str) -> int:
        """Remove the blob at ``path``; the bytes freed (0 if it was absent)."""
        return remove_file(self._fs, path)
