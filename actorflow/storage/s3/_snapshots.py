"""Where a run's snapshots live on S3: keys that list themselves.

A snapshot's key is ``snapshots/{entry}``, where ``entry`` is the name the file
store gives it (``_snapshot_names.SnapshotNames``: position, time, phase, id,
trigger, exact creation time, sizes; phase and trigger sealed with encryption
on), so one LIST under the run's ``snapshots/`` prefix lists them and writing
one is one PUT: the manifest is not rewritten. Older snapshots, and any whose
entry is too long for a name, are ``snapshots/{id}`` and listed by the
manifest, as before.

A listing is cached per run (:class:`SnapshotObjects`). A cached key is only a
hint for reading (a 404 lists again), but its *absence* is trusted when a
snapshot is written, to keep one id to one snapshot without a LIST per write:
so the cache lives only as long as nobody else can have written the run's
snapshots. It starts empty for a run this store created, is set by every LIST,
follows this store's own writes and deletes, and is dropped when a write may or
may not have landed and when this store claims a run someone owned before.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from actorflow._log import get_logger
from actorflow.errors import CheckpointNotFoundError, InvalidNameError, StorageError
from actorflow.storage._manifests import validate_snapshot_id
from actorflow.storage._sealing import snapshot_id_taken
from actorflow.storage._snapshot_names import SnapshotNames
from actorflow.storage.s3._wire import PreconditionFailed, drop_idle_lock

if TYPE_CHECKING:
    from actorflow.storage._records import Snapshot, SnapshotInfo
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["SnapshotObjects", "Stored", "best"]

_log = get_logger(__name__)


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


class SnapshotObjects:
    """The snapshot objects of one store's runs, and what it knows of their keys."""

    def __init__(self, objects: S3Objects, codec: Codec) -> None:
        self._objects = objects
        self._codec = codec
        self._names = SnapshotNames(codec)
        self._known: dict[str, dict[str, list[Stored]]] = {}
        self._locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)

    def prefix(self, run_id: str) -> str:
        """The run's ``snapshots/`` prefix."""
        return self._objects.key(run_id, "snapshots", "")

    def key_for(self, run_id: str, info: SnapshotInfo) -> tuple[str, bool]:
        """Where to write a snapshot, and whether that key lists it (else the manifest must)."""
        name = self._names.entry(run_id, info)
        if name is None:
            return self._objects.key(run_id, "snapshots", info.snapshot_id), False
        return self._objects.key(run_id, "snapshots", name), True

    def _parse(self, run_id: str, prefix: str, key: str, size: int) -> Stored | None:
        name = key[len(prefix) :]
        info = self._names.parse(run_id, name)
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
        for o in await self._objects.list_objects(operation, prefix):
            stored = self._parse(run_id, prefix, o.key, o.size)
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
        drop_idle_lock(self._locks, run_id)

    # --- objects --------------------------------------------------------------

    async def put(
        self, snapshot: Snapshot, info: SnapshotInfo, sealed: bytes
    ) -> tuple[Stored, bool]:
        """Store the snapshot's object unless its id is stored already.

        Returns where it is and whether this call wrote it.

        Raises:
            StorageError: the id holds a different snapshot (an id is written once).
        """
        run_id, snapshot_id = snapshot.run_id, snapshot.snapshot_id
        key, self_listing = self.key_for(run_id, info)
        mine = Stored(snapshot_id, key, len(sealed), info if self_listing else None)
        # One writer per run in this store: two writes of one id must see each other.
        async with self._locks[run_id]:
            found = (await self.listing(run_id, "write checkpoint")).get(snapshot_id)
            if found:
                there = best(found)
                same = await self._holds(snapshot, there)
                if same is not None:
                    return self._unless_different(snapshot, there, same), False
                self.forget(run_id)  # deleted meanwhile by someone else
            try:
                await self._objects.put("write checkpoint", key, sealed, token=uuid.uuid4().hex)
            except PreconditionFailed:
                # This very entry is there: written by another store, or by an earlier
                # call of ours whose answer was lost (a retry, or a cancelled write).
                same = await self._holds(snapshot, mine)
                self.forget(run_id)
                return self._unless_different(snapshot, mine, bool(same)), False
            except BaseException:
                self.forget(run_id)  # it may or may not have landed
                raise
            self.add(run_id, mine)
            return mine, True

    async def _holds(self, snapshot: Snapshot, stored: Stored) -> bool | None:
        """Whether ``stored`` holds ``snapshot``; None if the object is gone."""
        data = await self._objects.get_or_none("write checkpoint", stored.key)
        if data is None:
            return None
        try:
            existing = await self._load(data, snapshot.run_id, stored)
        except StorageError:
            return False
        return existing == snapshot

    def _unless_different(self, snapshot: Snapshot, stored: Stored, same: bool) -> Stored:
        if not same:
            raise snapshot_id_taken(self._objects.location(stored.key), snapshot.snapshot_id)
        return stored

    async def unwrite(self, run_id: str, stored: Stored) -> None:
        """Delete a snapshot object a write made, even if that write is being cancelled."""
        self.forget(run_id)
        with anyio.CancelScope(shield=True):
            try:
                await self._objects.delete("write checkpoint", [stored.key])
            except StorageError as exc:
                _log.warning(
                    "checkpoint_cleanup_failed",
                    run_id=run_id,
                    checkpoint=stored.snapshot_id,
                    key=stored.key,
                    error=str(exc),
                )

    async def read(self, run_id: str, snapshot_id: str) -> Snapshot:
        """A GET of the snapshot's object, after a LIST unless its key is known.

        Raises:
            CheckpointNotFoundError: no object has that id.
        """
        stored = self.cached(run_id, snapshot_id)
        if stored is not None and (data := await self._get(stored)) is not None:
            return await self._load(data, run_id, stored)
        # Not known to this store, or gone since: look again.
        found = (await self.scan(run_id, "read checkpoint")).get(snapshot_id)
        stored = best(found) if found else None
        if stored is None or (data := await self._get(stored)) is None:
            raise CheckpointNotFoundError(run_id, snapshot_id)
        return await self._load(data, run_id, stored)

    async def _get(self, stored: Stored) -> bytes | None:
        return await self._objects.get_or_none("read checkpoint", stored.key)

    async def _load(self, data: bytes, run_id: str, stored: Stored) -> Snapshot:
        """Verify and decode in a worker thread."""
        location = self._objects.location(stored.key)
        return await anyio.to_thread.run_sync(
            lambda: self._codec.load_snapshot(
                data, run_id=run_id, snapshot_id=stored.snapshot_id, location=location
            )
        )
