"""Where a run's snapshots live on S3: keys that list themselves.

A snapshot's key is ``snapshots/{entry}``, where ``entry`` is the name the file
store gives it (``_snapfiles.entry_name``: position, time, phase, id, trigger,
exact creation time, sizes), so one LIST under the run's ``snapshots/`` prefix
lists them and writing one is one PUT: the manifest is not rewritten. Older
snapshots, and any whose entry is too long for a name, are ``snapshots/{id}``
and listed by the manifest, as before.

A listing is cached per run (:class:`SnapshotKeys`). A cached key is only a
hint for reading (a 404 lists again), but its *absence* is trusted when a
snapshot is written, to keep one id to one snapshot without a LIST per write:
so the cache lives only as long as nobody else can have written the run's
snapshots. It starts empty for a run this store created, is set by every LIST,
follows this store's own writes and deletes, and is dropped when a write may or
may not have landed and when this store claims a run someone owned before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from actorflow.errors import InvalidNameError
from actorflow.storage._manifests import validate_snapshot_id
from actorflow.storage._snapfiles import entry_name, parse_entry

if TYPE_CHECKING:
    from actorflow.storage._records import SnapshotInfo
    from actorflow.storage._s3_objects import S3Objects

__all__ = ["SnapshotKeys", "Stored", "best"]


@dataclass(frozen=True, slots=True)
class Stored:
    """One snapshot object: its key, size, and the entry its key carries.

    ``info`` is None for an object at ``snapshots/{id}`` (written the older
    way): the manifest holds its entry.
    """

    snapshot_id: str
    key: str
    size: int
    info: SnapshotInfo | None


def best(found: list[Stored]) -> Stored:
    """Of several objects of one id, the one that counts: self-listing first, then newest."""
    return max(found, key=lambda s: (s.info is not None, s.info.created if s.info else 0.0, s.key))


class SnapshotKeys:
    """Snapshot keys of the runs of one store, and what it knows of them."""

    def __init__(self, objects: S3Objects) -> None:
        self._o = objects
        self._known: dict[str, dict[str, list[Stored]]] = {}

    def prefix(self, run_id: str) -> str:
        """The run's ``snapshots/`` prefix."""
        return self._o.key(run_id, "snapshots", "")

    def key_for(self, run_id: str, info: SnapshotInfo) -> tuple[str, bool]:
        """Where to write a snapshot, and whether that key lists it (else the manifest must)."""
        name = entry_name(info)
        if name is None:
            return self._o.key(run_id, "snapshots", info.snapshot_id), False
        return self._o.key(run_id, "snapshots", name), True

    def _parse(self, prefix: str, key: str, size: int) -> Stored | None:
        name = key[len(prefix) :]
        info = parse_entry(name)
        if info is not None:
            return Stored(info.snapshot_id, key, size, info)
        try:
            return Stored(validate_snapshot_id(name), key, size, None)
        except InvalidNameError:
            return None  # not a snapshot: left alone

    async def scan(self, run_id: str, operation: str) -> dict[str, list[Stored]]:
        """List the run's snapshot objects by id (one LIST, paginated); cache the result."""
        prefix = self.prefix(run_id)
        found: dict[str, list[Stored]] = {}
        for o in await self._o.list_objects(operation, prefix):
            stored = self._parse(prefix, o.key, o.size)
            if stored is not None:
                found.setdefault(stored.snapshot_id, []).append(stored)
        self._known[run_id] = found
        return found

    async def listing(self, run_id: str, operation: str) -> dict[str, list[Stored]]:
        """The cached listing, or a fresh one."""
        known = self._known.get(run_id)
        return known if known is not None else await self.scan(run_id, operation)

    def cached(self, run_id: str, snapshot_id: str) -> Stored | None:
        """The cached object of an id, if the cache has one (a hint: it may be gone)."""
        found = self._known.get(run_id, {}).get(snapshot_id)
        return best(found) if found else None

    def start_empty(self, run_id: str) -> None:
        """This store just created the run: it has no snapshots yet."""
        self._known[run_id] = {}

    def add(self, run_id: str, stored: Stored) -> None:
        """This store wrote ``stored`` (or found it there)."""
        known = self._known.get(run_id)
        if known is not None:
            others = [s for s in known.get(stored.snapshot_id, ()) if s.key != stored.key]
            known[stored.snapshot_id] = [*others, stored]

    def drop(self, run_id: str, snapshot_id: str) -> None:
        """This store deleted every object of ``snapshot_id``."""
        known = self._known.get(run_id)
        if known is not None:
            known.pop(snapshot_id, None)

    def forget(self, run_id: str) -> None:
        """Stop trusting the cache for the run: the next write or read lists again."""
        self._known.pop(run_id, None)
