"""An S3 store's index of unfinished runs: one empty object per run under ``unfinished/``.

As on the file store, a marker is written before a run's manifest and
deleted after the manifest that says the run finished, so a crash between
leaves an extra marker (a reader finds the run finished and drops it), never
a missing one. Listing the index is one LIST per thousand unfinished runs,
whatever the number of finished ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.storage._manifests import index_run_ids, index_strays
from actorflow.storage._records import validate_run_id
from actorflow.storage.s3._wire import PreconditionFailed

if TYPE_CHECKING:
    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["UnfinishedKeys"]

_FOLDER = "unfinished"


class UnfinishedKeys:
    """The markers under ``<prefix>unfinished/``."""

    def __init__(self, objects: S3Objects) -> None:
        self._objects = objects
        self._root = objects.store_key(_FOLDER, "")
        self._warned: set[str] = set()  # entries that are no run id, warned of once

    def _key(self, run_id: str) -> str:
        return self._root + validate_run_id(run_id)

    async def add(self, run_id: str) -> None:
        """Mark the run unfinished (idempotent)."""
        try:
            await self._objects.put("index run", self._key(run_id), b"", token=run_id)
        except PreconditionFailed:
            pass  # marked already

    async def remove(self, run_id: str) -> None:
        """Drop the run's marker, if any."""
        await self._objects.delete("unindex run", [self._key(run_id)])

    async def strays(self) -> list[UnreadableEntry]:
        """The names in the index that are no run id, for ``validate`` to name."""
        return index_strays(await self._names(), self._location)

    async def _names(self) -> list[str]:
        found = await self._objects.list_objects("list unfinished runs", self._root)
        return [o.key[len(self._root) :] for o in found]

    async def list(self) -> list[str]:
        """The marked run ids; a name that is no run id is skipped (see ``index_run_ids``)."""
        return index_run_ids(await self._names(), self._location, self._warned)

    def _location(self, name: str) -> str:
        return self._objects.location(self._root + name)

    async def reset(self, unfinished: set[str], listed_before: set[str]) -> int:
        """Mark ``unfinished``, and unmark the rest of ``listed_before``; how many changed.

        ``listed_before`` are the markers read before the manifests that gave
        ``unfinished``: a run created meanwhile was marked after that read,
        and its marker stays (it is in no listing yet, but it is unfinished).
        """
        marked = set(await self.list())
        for run_id in unfinished - marked:
            await self.add(run_id)
        doomed = (marked & listed_before) - unfinished
        await self._objects.delete("reindex runs", [self._key(r) for r in sorted(doomed)])
        return len(unfinished - marked) + len(doomed)
