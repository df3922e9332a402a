"""A file store's index of unfinished runs: one empty file per run in ``.unfinished/``.

A marker is made before a run's manifest and removed after the manifest
that says the run finished, so a crash between the two leaves an extra
marker (a reader finds the run finished and drops it), never a missing one.
Markers are not fsynced: a power loss may take one, and
:meth:`~actorflow.storage.RunIndex.reindex` (which workers run when they
start) puts it back. That keeps the index off the path a step's fsync pays for.

The folder's name starts with a dot, like the store's temp files, so it is
never read as a run. Every method blocks: the store calls them from worker threads.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from actorflow.storage._manifests import index_run_ids, index_strays
from actorflow.storage._records import validate_run_id

if TYPE_CHECKING:
    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage.file._fs import FileSystem

__all__ = ["INDEX_FOLDER", "UnfinishedMarks"]

INDEX_FOLDER = ".unfinished"


class UnfinishedMarks:
    """The markers under ``root/.unfinished``."""

    def __init__(self, fs: FileSystem, root: str) -> None:
        self._fs = fs
        self._folder = os.path.join(root, INDEX_FOLDER)
        self._warned: set[str] = set()  # entries that are no run id, warned of once

    def _path(self, run_id: str) -> str:
        return os.path.join(self._folder, validate_run_id(run_id))

    def add(self, run_id: str) -> None:
        """Mark the run unfinished (idempotent)."""
        path = self._path(run_id)
        try:
            handle = self._fs.open(path, "write")
        except FileNotFoundError:
            self._fs.makedirs(self._folder)
            handle = self._fs.open(path, "write")
        self._fs.close(handle)

    def remove(self, run_id: str) -> None:
        """Drop the run's marker, if any."""
        try:
            self._fs.unlink(self._path(run_id))
        except FileNotFoundError:
            pass

    def strays(self) -> list[UnreadableEntry]:
        """The names in the index that are no run id, for ``validate`` to name."""
        return index_strays(self._names(), self._location)

    def _names(self) -> list[str]:
        try:
            names = self._fs.listdir(self._folder)
        except FileNotFoundError:
            return []
        return [name for name in names if not name.startswith(".")]  # temp files

    def list(self) -> list[str]:
        """The marked run ids; a name that is no run id is skipped (see ``index_run_ids``)."""
        return index_run_ids(self._names(), self._location, self._warned)

    def _location(self, name: str) -> str:
        return os.path.join(self._folder, name)

    def reset(self, unfinished: set[str], listed_before: set[str]) -> int:
        """Mark ``unfinished``, and unmark the rest of ``listed_before``; how many changed.

        ``listed_before`` are the markers read before the manifests that gave
        ``unfinished``: a run created meanwhile was marked after that read,
        and its marker stays (it is in no listing yet, but it is unfinished).
        """
        marked = set(self.list())
        for run_id in unfinished - marked:
            self.add(run_id)
        doomed = (marked & listed_before) - unfinished
        for run_id in doomed:
            self.remove(run_id)
        return len(unfinished - marked) + len(doomed)
