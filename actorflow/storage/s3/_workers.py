"""One lease per store, not a heartbeat per run: the worker lease.

A store that claims runs writes ``workers/<id>``, a sealed
:class:`WorkerLease` with an expiry, and renews it every ``ttl / 3`` however
many runs it holds: one PUT per interval for a thousand runs as for one.
Each run's own lease names the worker (``Lease.worker``) and carries no
expiry of its own; it is live while that worker's lease is. The worker lease
also lists the runs the store held at its last renewal, so a process looking
for orphans learns from one LIST and a GET per live worker which runs have a
live owner, without reading each run's lease.

That list is a hint, late by up to one renewal: a run claimed since is
missing from it, and a claim attempt then finds the run's lease live and
backs off. Correctness still rests on the run lease's compare-and-swap and
on the epochs that fence a stale owner (``_fencing.py``); the worker lease's
clock, like a run lease's, only decides when another process may try.
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow.errors import CorruptedDataError, EncryptionKeyError
from actorflow.storage._envelope import Kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["WorkerLease", "WorkerLeases"]

_FOLDER = "workers"
_SLOT = "worker"
FORGET_AFTER = 24 * 3600.0
"""Seconds after its expiry when a dead worker's lease object is deleted by a reader."""


class WorkerLease(msgspec.Struct, frozen=True, kw_only=True):
    """What ``workers/<worker>`` holds: whose store, until when, holding which runs."""

    worker: str
    owner: str
    expires: float
    runs: tuple[str, ...] = ()


_decoder = msgspec.msgpack.Decoder(WorkerLease)


class WorkerLeases:
    """This store's own worker lease, and reading the others'."""

    def __init__(self, objects: S3Objects, codec: Codec, ttl: float) -> None:
        self._objects = objects
        self._codec = codec
        self.ttl = ttl
        self.worker = uuid.uuid4().hex
        self._root = objects.store_key(_FOLDER, "")
        self._expires = 0.0
        self._renewed = 0.0
        self._owner = ""
        self._lock = anyio.Lock()

    def expired(self) -> bool:
        """Whether this store's lease ran out by its own clock (or was never written)."""
        return self._expires <= time.time()

    async def keep_alive(self, owner: str | None, runs: Callable[[], tuple[str, ...]]) -> bool:
        """Renew the lease if a third of its time has passed; whether it had run out first.

        A lease that ran out may have let other processes take this store's
        runs: the caller then checks each run's own lease.
        """
        if owner:
            self._owner = owner
        async with self._lock:
            now = time.time()
            if self._expires > now and now - self._renewed < self.ttl / 3:
                return False
            lapsed = self._renewed > 0 and self._expires <= now
            await self._write(now + self.ttl, runs())
            self._renewed = now
            return lapsed

    async def _write(self, expires: float, runs: tuple[str, ...]) -> None:
        lease = WorkerLease(worker=self.worker, owner=self._owner, expires=expires, runs=runs)
        sealed = self._codec.seal(
            msgspec.msgpack.encode(lease), kind=Kind.LEASE, run_id=self.worker, slot=_SLOT
        )
        await self._objects.overwrite("renew worker lease", self._root + self.worker, sealed)
        self._expires = expires

    async def release(self) -> None:
        """End the lease at once (the store closes): its runs are anyone's to take."""
        async with self._lock:
            if self._renewed > 0 and self._expires > 0:
                await self._write(0.0, ())

    async def read(self, worker: str) -> WorkerLease | None:
        """Another worker's lease; ``None`` if absent or unreadable (then it protects nothing)."""
        key = self._root + worker
        data = await self._objects.get_or_none("read worker lease", key)
        if data is None:
            return None
        try:
            raw = self._codec.open(
                data,
                kind=Kind.LEASE,
                run_id=worker,
                slot=_SLOT,
                location=self._objects.location(key),
            )
            return _decoder.decode(raw)
        except (CorruptedDataError, EncryptionKeyError, msgspec.DecodeError):
            return None

    async def expiry(self, worker: str) -> float:
        """When ``worker``'s lease runs out (``time.time()``); 0.0 if it has none."""
        if worker == self.worker:
            return self._expires
        lease = await self.read(worker)
        return lease.expires if lease is not None else 0.0

    async def count_live(self) -> int:
        """How many workers' leases (this store's included) are live now: one LIST, a GET each."""
        found = await self._objects.list_objects("list workers", self._root)
        names = [o.key[len(self._root) :] for o in found]
        leases = await self._objects.gather([functools.partial(self.read, w) for w in names])
        now = time.time()
        return sum(1 for lease in leases if lease is not None and lease.expires > now)

    async def held_by_live(self) -> set[str]:
        """The runs that live workers (this store included) listed at their last renewal.

        Dead workers' lease objects long past their expiry are deleted on the way.
        """
        found = await self._objects.list_objects("list workers", self._root)
        names = [o.key[len(self._root) :] for o in found]
        leases = await self._objects.gather([functools.partial(self.read, w) for w in names])
        now = time.time()
        held: set[str] = set()
        dead: list[str] = []
        for name, lease in zip(names, leases, strict=True):
            if lease is not None and lease.expires > now:
                held.update(lease.runs)
            elif lease is not None and lease.expires + FORGET_AFTER < now:
                dead.append(self._root + name)
        if dead:
            await self._objects.delete("forget dead workers", dead)
        return held
