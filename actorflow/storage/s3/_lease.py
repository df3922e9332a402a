"""Run ownership on S3: a lease object naming its worker, and a fencing epoch.

``lease`` holds a sealed :class:`Lease`. Claiming creates it with
``If-None-Match: *`` or replaces a dead or released one with ``If-Match``
on its ETag, so of many claimers exactly one wins, and the epoch grows by one
with every new owner. Release sets the expiry to zero but keeps the epoch, so
epochs never repeat.

A run's lease is live while the worker lease it names is (``_workers.py``):
the store renews that one object every ``ttl / 3``, not a lease per run. A
lease written before worker leases existed carries its own expiry and is
read as it always was. A holder whose worker lease ran out renews it before
it writes again, then reads each run's lease, and a run someone else took
meanwhile gets :class:`LeaseLostError`.

The expiry is read on each process's own clock, so it decides only when
another process may try to take the run (liveness). What keeps a stale owner
from writing is its epoch, checked against the log and the manifest
(``_fencing.py``). A lease found lost is remembered until it is released, so
every later write of this store to the run fails at once, and its epoch still
fences it (it never falls back to writing as a store without a lease).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import LeaseLostError, RunLockedError
from actorflow.storage._codec import decode_lease, encode_lease
from actorflow.storage._envelope import Kind
from actorflow.storage._protocol import Lease
from actorflow.storage.s3._wire import PreconditionFailed
from actorflow.storage.s3._workers import WorkerLeases

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["LeaseTable"]


def _same(a: Lease, b: Lease) -> bool:
    return (a.owner, a.epoch) == (b.owner, b.epoch)


class LeaseTable:
    """Claim, renew, release and check the leases this store holds."""

    def __init__(self, objects: S3Objects, codec: Codec, ttl: float) -> None:
        self._objects = objects
        self._codec = codec
        self.ttl = ttl
        self.workers = WorkerLeases(objects, codec, ttl)
        self.fences: list[Callable[[], Awaitable[None]]] = []
        """What else a lapse of the worker lease must check (queue slots taken meanwhile)."""
        self.refused: set[str] = set()
        """Runs not to claim once: the queue slot they were to run under was lost."""
        self._held: dict[str, Lease] = {}
        self._lost: dict[str, Lease] = {}

    async def live(self, lease: Lease) -> bool:
        """Whether ``lease`` protects its run now: not released, its worker (or itself) alive."""
        if lease.worker is None or lease.expires == 0.0:
            return lease.expires is not None and lease.expires > time.time()
        return await self.workers.expiry(lease.worker) > time.time()

    async def expiry(self, lease: Lease) -> float | None:
        """When ``lease`` stops protecting its run (its worker's expiry, for a worker's lease)."""
        if lease.worker is None or lease.expires == 0.0:
            return lease.expires
        return await self.workers.expiry(lease.worker)

    def _held_runs(self) -> tuple[str, ...]:
        return tuple(self._held)

    async def keep_worker_alive(self, owner: str) -> None:
        """Make sure this store's worker lease is live (renewed if due): what a queue slot names."""
        await self._keep_alive(owner)

    async def _keep_alive(self, owner: str | None = None) -> None:
        """Renew this store's worker lease if due; if it had run out, check every held run."""
        if await self.workers.keep_alive(owner, self._held_runs):
            for run_id, held in list(self._held.items()):
                current = await self.read(run_id)
                if self._held.get(run_id) is not held:
                    continue  # released (or lost) while it was read: nothing to decide
                if current is None or not _same(current[0], held) or current[0].expires == 0.0:
                    self.lose(run_id)
            for fence in self.fences:
                await fence()

    def _key(self, run_id: str) -> str:
        return self._objects.key(run_id, "lease")

    async def read(self, run_id: str) -> tuple[Lease, str] | None:
        """The stored lease and its ETag, or ``None``."""
        key = self._key(run_id)
        got = await self._objects.get_or_none_with_etag("read lease", key)
        if got is None:
            return None
        data, etag = got
        location = self._objects.location(key)
        raw = self._codec.open(
            data, kind=Kind.LEASE, run_id=run_id, slot="lease", location=location
        )
        return decode_lease(raw, location), etag

    async def _write(self, lease: Lease, operation: str, if_match: str | None) -> None:
        sealed = self._codec.seal(
            encode_lease(lease), kind=Kind.LEASE, run_id=lease.run_id, slot="lease"
        )
        await self._objects.put(
            operation, self._key(lease.run_id), sealed, token=uuid.uuid4().hex, if_match=if_match
        )

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Take the run unless a live lease exists.

        Raises:
            RunLockedError: a live lease exists, or another claimer won the race.
        """
        await self._keep_alive(owner)  # the lease about to be named must be live
        if run_id in self.refused:  # its queue slot went to another worker as this one stalled
            self.refused.discard(run_id)
            raise RunLockedError(run_id, None)
        current = await self.read(run_id)
        if current is not None and await self.live(current[0]):
            raise RunLockedError(run_id, current[0].owner)
        epoch = current[0].epoch + 1 if current is not None else 1
        lease = Lease(run_id=run_id, owner=owner, epoch=epoch, worker=self.workers.worker)
        try:
            await self._write(lease, "claim run", current[1] if current is not None else None)
        except PreconditionFailed:
            raced = await self.read(run_id)
            raise RunLockedError(run_id, raced[0].owner if raced else None) from None
        self._lost.pop(run_id, None)
        self._held[run_id] = lease
        return lease

    async def renew(self, lease: Lease) -> Lease:
        """Keep ``lease`` alive: its worker lease, renewed if due (one PUT for all runs).

        Raises:
            LeaseLostError: another owner took the run, or it was released.
        """
        run_id = lease.run_id
        if lease.worker is not None:
            await self._keep_alive()
            if (lost := self._lost.get(run_id)) is not None and _same(lost, lease):
                raise LeaseLostError(run_id, lease.epoch)
            held = self._held.get(run_id)
            if held is None or not _same(held, lease):
                raise LeaseLostError(run_id, lease.epoch)
            return held
        current = await self.read(run_id)
        if current is None or not _same(current[0], lease) or current[0].expires == 0.0:
            self.lose(run_id)
            raise LeaseLostError(run_id, lease.epoch)
        fresh = msgspec.structs.replace(current[0], expires=time.time() + self.ttl)
        try:
            await self._write(fresh, "renew lease", current[1])
        except PreconditionFailed:
            self.lose(run_id)
            raise LeaseLostError(run_id, lease.epoch) from None
        if run_id in self._held:  # not released (nor lost) while this renewal was on its way
            self._held[run_id] = fresh
        return fresh

    async def release(self, lease: Lease) -> None:
        """End ``lease`` if it is still the stored one. Idempotent."""
        run_id = lease.run_id
        for kept in (self._held, self._lost):
            if (held := kept.get(run_id)) is not None and _same(held, lease):
                del kept[run_id]
        current = await self.read(run_id)
        if current is None or not _same(current[0], lease):
            return
        try:
            await self._write(
                msgspec.structs.replace(current[0], expires=0.0), "release run", current[1]
            )
        except PreconditionFailed:
            pass  # taken meanwhile: nothing of ours left to release

    async def is_owned(self, run_id: str) -> bool:
        """Whether a live lease exists."""
        current = await self.read(run_id)
        return current is not None and await self.live(current[0])

    def epoch(self, run_id: str) -> int | None:
        """The epoch this store writes the run under: its lease's, held or lost; ``None``: none."""
        lease = self._held.get(run_id)
        if lease is None:
            lease = self._lost.get(run_id)
        return lease.epoch if lease is not None else None

    def holds(self, run_id: str) -> bool:
        """Whether this store holds the run's lease (claimed, not lost or released)."""
        return run_id in self._held

    def lose(self, run_id: str) -> None:
        """The run was taken over: refuse this store's writes to it until the lease is released."""
        held = self._held.pop(run_id, None)
        if held is not None:
            self._lost[run_id] = held

    def forget(self, run_id: str) -> None:
        """Stop tracking the run's lease (the run was deleted)."""
        self._held.pop(run_id, None)
        self._lost.pop(run_id, None)

    async def check(self, run_id: str) -> None:
        """Before a write: refuse it if the lease was lost; renew one that ran out.

        Renewing by the local clock only keeps the owner's lease alive; the
        write itself is fenced by its epoch whatever the clocks say.

        Raises:
            LeaseLostError: the lease was lost, or it ran out and another owner took the run.
        """
        if (lost := self._lost.get(run_id)) is not None:
            raise LeaseLostError(run_id, lost.epoch)
        held = self._held.get(run_id)
        if held is None:
            return
        if held.worker is not None:
            if self.workers.expired():
                await self._keep_alive()
                if (lost := self._lost.get(run_id)) is not None:
                    raise LeaseLostError(run_id, lost.epoch)
        elif held.expires is not None and held.expires <= time.time():
            await self.renew(held)
