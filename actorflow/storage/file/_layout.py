"""Where a file store keeps each run, and the one worker-thread hop of every operation.

Layout::

    <path>/runs/<run id>/
        manifest                      the run's manifest, replaced atomically
        manifest.lock                 flock'ed while the manifest is read, changed, written
        lock                          flock'ed by the run's live owner
        owner                         the current lease (owner, epoch)
        log/00000000000000000000.seg  append-only segments, named by first position
        blobs/<address>               content-addressed states, written once
        snapshots/000000042_20260125T101500Z_draft%231_<id>~<trigger>~<time>~<sizes>.ckpt
                                      each name lists its snapshot; with encryption on,
                                      phase and trigger are sealed (see _snapshot_names)
        inbox/00000000000000000003.msg messages posted to the run, one file each, named by
                                      seq; made on the first post (see _inbox)
        events/00000000000000000000.evs the run's streamed events (not durable, bounded:
                                      the oldest segments go), named by first position;
                                      made on the first emit (see _events)
        inbox.wake                    a FIFO that posts write a byte to, made by the run's
                                      watcher (its live owner) and removed by it (see _wake)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

from actorflow.errors import ActorflowError, RunNotFoundError, StorageError
from actorflow.storage._records import validate_run_id
from actorflow.storage.file._threads import run_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage.file._fs import FileSystem

__all__ = ["LAZY_PARTS", "RUN_PARTS", "RunFolders", "os_error_text"]

T = TypeVar("T")

RUN_PARTS = ("log", "blobs", "snapshots")
"""The folders made with every run's folder."""

LAZY_PARTS = ("inbox", "events")
"""Folders of a run made on first use: runs written before they existed have none."""


def os_error_text(exc: OSError) -> str:
    """What the operating system said, and the file it said it of where it named one.

    An error raised without a file (a full disk met by ``write`` on an open
    handle) has ``filename`` None: it is left out rather than shown as "(None)".
    """
    text = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is None:
        return text
    if exc.filename2 is not None:
        return f"{text} ({exc.filename} -> {exc.filename2})"
    return f"{text} ({exc.filename})"


class RunFolders:
    """The ``runs`` folder of one store: paths, existence, and calls into worker threads.

    Args:
        fs: the file layer every collaborator of the store shares.
        path: the store's folder (``runs`` is made inside it on first use).
    """

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.root = os.path.join(path, "runs")
        self._ready = False

    async def call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        """Run one durable operation in a worker thread, translating OS errors.

        Raises:
            StorageError: the operating system refused (naming ``operation``).
        """
        try:
            return await run_in_thread(self._guarded, fn, args)
        except ActorflowError:
            raise
        except OSError as exc:
            raise StorageError(operation, os_error_text(exc)) from exc

    def _guarded(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        if not self._ready:
            self.fs.makedirs(self.root)
            self._ready = True
        return fn(*args)

    def run(self, run_id: str, *parts: str) -> str:
        """The path of ``parts`` inside the run's folder (the run id validated)."""
        return os.path.join(self.root, validate_run_id(run_id), *parts)

    def exists(self, run_id: str) -> bool:
        """Whether the run exists (its manifest does). Blocks."""
        return self.fs.exists(self.run(run_id, "manifest"))

    def require(self, run_id: str) -> None:
        """Raise ``RunNotFoundError`` unless the run exists. Blocks."""
        if not self.exists(run_id):
            raise RunNotFoundError(run_id)
