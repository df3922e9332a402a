"""The runs the pages list, read once for a few seconds of pages, then refreshed.

Listing a file store reads every run's manifest (a quarter of a second for
ten thousand runs), and naming what is no run scans it again. The runs page
needs both on every load, and the waiting page the manifests: they share one
listing for ``MANIFESTS_TTL`` seconds (what cannot be read, ``UNREADABLE_TTL``),
and pages loaded together wait for one read, not one each. On a store that
tells its runs' versions (:class:`~actorflow.storage.RunVersions`) the listing
is refreshed by reading only the manifests whose version changed; when most
did, everything is read again in one listing. A run's own pages always read
its manifest afresh.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import anyio

from actorflow.errors import CorruptedDataError, EncryptionKeyError, RunNotFoundError
from actorflow.storage import RunVersions, UnreadableLister

if TYPE_CHECKING:
    from actorflow.storage import RunManifest, Store, UnreadableEntry

__all__ = ["MANIFESTS_TTL", "UNREADABLE_TTL", "Listing"]

MANIFESTS_TTL: Final = 2.0
UNREADABLE_TTL: Final = 30.0
_MOSTLY_CHANGED: Final = 0.25
"""Above this share of runs changed, one listing reads them faster than reads one by one."""
_READERS: Final = 16
"""Changed manifests read side by side."""


def _order(manifest: RunManifest) -> tuple[float, str]:
    return manifest.created, manifest.run_id  # as list_runs gives them


class Listing:
    """A store's manifests and unreadable entries, each kept for a short while (``ttl`` seconds)."""

    def __init__(self, store: Store, *, ttl: float = MANIFESTS_TTL) -> None:
        self._store = store
        self._ttl = ttl
        self._lock = anyio.Lock()
        self._manifests: tuple[float, list[RunManifest]] | None = None
        self._unreadable: tuple[float, list[UnreadableEntry]] | None = None
        # what the store said at the last refresh (RunVersions): each run's version, the
        # runs whose version was "" (to read again), and the manifests read, by run id
        self._versions: dict[str, str] | None = None
        self._unstable: set[str] = set()
        self._by_id: dict[str, RunManifest] = {}

    async def manifests(self) -> tuple[list[RunManifest], float]:
        """Every readable run's manifest, and when they were read (``time.time()``)."""
        async with self._lock:
            now = time.time()
            if self._manifests is None or now - self._manifests[0] > self._ttl:
                self._manifests = (now, await self._refresh())
            return self._manifests[1], self._manifests[0]

    async def _refresh(self) -> list[RunManifest]:
        store = self._store
        if not isinstance(store, RunVersions):
            return await store.list_runs()
        versions = await store.list_run_versions()  # before the reads: a later change shows
        before = self._versions
        if before is None:
            return await self._list_all(store, versions)
        # set operations on the dicts' views: a store of many runs costs no Python loop
        changed = {run_id for run_id, _ in versions.items() - before.items()}
        changed.update(r for r in self._unstable if r in versions)
        if len(changed) > len(versions) * _MOSTLY_CHANGED:
            return await self._list_all(store, versions)
        removed = before.keys() - versions.keys()
        self._versions = versions
        self._unstable = {r for r in changed if not versions[r]}
        if not changed and not removed and self._manifests is not None:
            return self._manifests[1]
        read = await self._read(store, list(changed))
        for run_id in removed | changed:
            manifest = read.get(run_id)
            if manifest is None:
                self._by_id.pop(run_id, None)
            else:
                self._by_id[run_id] = manifest
        return sorted(self._by_id.values(), key=_order)

    async def _list_all(self, store: Store, versions: dict[str, str]) -> list[RunManifest]:
        """Every manifest read again (the first time, or when most runs changed)."""
        listed = await store.list_runs()
        self._by_id = {m.run_id: m for m in listed}
        # a run created after the versions were listed has none: the next refresh reads it;
        # one that cannot be read keeps its version, read again only once it changes
        self._versions = versions
        self._unstable = {r for r, v in versions.items() if not v}
        return listed

    @staticmethod
    async def _read(store: Store, run_ids: list[str]) -> dict[str, RunManifest]:
        """The manifests of ``run_ids`` that can be read (``list_runs`` skips the others too)."""
        found: dict[str, RunManifest] = {}
        limit = anyio.CapacityLimiter(_READERS)

        async def one(run_id: str) -> None:
            async with limit:
                try:
                    found[run_id] = await store.read_run(run_id)
                except (RunNotFoundError, CorruptedDataError, EncryptionKeyError):
                    pass  # gone, damaged or sealed: the health page names it

        async with anyio.create_task_group() as tg:
            for run_id in run_ids:
                tg.start_soon(one, run_id)
        return found

    async def unreadable(self) -> list[UnreadableEntry]:
        """What the store's listing skips (damaged, sealed, not a run)."""
        if not isinstance(self._store, UnreadableLister):
            return []
        async with self._lock:
            now = time.time()
            if self._unreadable is None or now - self._unreadable[0] > UNREADABLE_TTL:
                self._unreadable = (now, await self._store.list_unreadable())
            return self._unreadable[1]
