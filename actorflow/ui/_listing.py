"""The runs the pages list, read once for a few seconds of pages.

Listing a file store reads every run's manifest (a quarter of a second for
ten thousand runs), and naming what is no run scans it again. The runs page
needs both on every load, and the waiting page the manifests: they share one
listing for ``MANIFESTS_TTL`` seconds (what cannot be read, ``UNREADABLE_TTL``),
and pages loaded together wait for one read, not one each. A run's own pages
always read its manifest afresh.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import anyio

from actorflow.storage import UnreadableLister

if TYPE_CHECKING:
    from actorflow.storage import RunManifest, Store, UnreadableEntry

__all__ = ["MANIFESTS_TTL", "UNREADABLE_TTL", "Listing"]

MANIFESTS_TTL: Final = 2.0
UNREADABLE_TTL: Final = 30.0


class Listing:
    """A store's manifests and unreadable entries, each kept for a short while."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = anyio.Lock()
        self._manifests: tuple[float, list[RunManifest]] | None = None
        self._unreadable: tuple[float, list[UnreadableEntry]] | None = None

    async def manifests(self) -> tuple[list[RunManifest], float]:
        """Every readable run's manifest, and when they were read (``time.time()``)."""
        async with self._lock:
            now = time.time()
            if self._manifests is None or now - self._manifests[0] > MANIFESTS_TTL:
                self._manifests = (now, await self._store.list_runs())
            return self._manifests[1], self._manifests[0]

    async def unreadable(self) -> list[UnreadableEntry]:
        """What the store's listing skips (damaged, sealed, not a run)."""
        if not isinstance(self._store, UnreadableLister):
            return []
        async with self._lock:
            now = time.time()
            if self._unreadable is None or now - self._unreadable[0] > UNREADABLE_TTL:
                self._unreadable = (now, await self._store.list_unreadable())
            return self._unreadable[1]
