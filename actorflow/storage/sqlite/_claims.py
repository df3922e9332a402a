"""A SqliteStore's claims: a run's ``flock`` beside the file, and its ``claims`` row.

The flock (:mod:`._locks`) is the claim: the operating system ends it with
its process. The row holds the last owner's sealed lease and its epoch,
moved on by each claim, which every write of an owner checks (fencing), so
an owner whose run was taken over is refused in the transaction it wrote in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from actorflow.errors import (
    CorruptedDataError,
    EncryptionKeyError,
    LeaseLostError,
    RunLockedError,
)
from actorflow.storage._capabilities import ClaimInfo
from actorflow.storage._codec import decode_lease, encode_lease
from actorflow.storage._envelope import Kind
from actorflow.storage._protocol import Lease
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from actorflow.storage._records import RunManifest
    from actorflow.storage._sealing import Codec
    from actorflow.storage.sqlite._db import Database
    from actorflow.storage.sqlite._locks import LockFolder
    from actorflow.storage.sqlite._runs import Manifests

__all__ = ["Claims"]

T = TypeVar("T")


class Claims:
    """The runs one store claims, and the ``claims`` rows of every run in its file.

    Args:
        db: the store's connections.
        locks: the store's flocks.
        manifests: the runs' rows (a claim needs its run).
        codec: seals the leases in the rows.
        location: the database file, as errors name it.
    """

    def __init__(
        self, db: Database, locks: LockFolder, manifests: Manifests, codec: Codec, location: str
    ) -> None:
        self._db = db
        self._locks = locks
        self._manifests = manifests
        self._codec = codec
        self._location = location

    def fenced(
        self, run_id: str, write: Callable[[sqlite3.Connection], T]
    ) -> Callable[[sqlite3.Connection], T]:
        """``write``, first checking the lease this store holds on the run now, if any.

        The returned write raises ``LeaseLostError`` in its transaction when
        another owner took the run since.
        """
        lease = self._locks.lease(run_id)

        def fenced(conn: sqlite3.Connection) -> T:
            _fence(conn, lease)
            return write(conn)

        return fenced

    async def create(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Create the run, claimed for the owner its manifest names in the same commit."""
        run_id = manifest.run_id
        taken: list[tuple[Lease, int]] = []

        def create(conn: sqlite3.Connection) -> tuple[RunManifest, bool]:
            stored, created = self._manifests.create(conn, manifest)
            if created and manifest.owner is not None:
                handle = self._locks.try_run(run_id)
                if handle is not None:  # else someone probes it right now: the claim will tell
                    try:
                        epoch = _next_epoch(conn, run_id)
                        lease = Lease(run_id=run_id, owner=manifest.owner, epoch=epoch)
                        self._record(conn, lease)
                    except BaseException:
                        self._locks.unlock(handle)
                        raise
                    taken.append((lease, handle))
            return stored, created

        def undo() -> None:
            for _lease, handle in taken:
                self._locks.unlock(handle)
            taken.clear()

        stored, created = await self._db.write(create, durable=True, undo=undo)
        for lease, handle in taken:
            self._locks.keep_created(lease, handle)
        return stored, created

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Take the run's flock, then the next epoch in its row: the new lease.

        Raises:
            RunLockedError: a live owner (in this process or another) holds it.
        """
        adopted = self._locks.adopt_created(run_id, owner)
        if adopted is not None:
            return adopted
        await self._db.read("claim run", self._manifests.require, run_id)
        handle = await self._locks.call("claim run", self._locks.try_run, run_id)
        if handle is None:
            last = await self._db.read("claim run", self._last_owner, run_id)
            raise RunLockedError(run_id, last.owner if last is not None else None)

        def take(conn: sqlite3.Connection) -> Lease:
            self._manifests.require(conn, run_id)
            lease = Lease(run_id=run_id, owner=owner, epoch=_next_epoch(conn, run_id))
            self._record(conn, lease)
            return lease

        try:
            lease = await self._db.write(take, durable=False)
        except BaseException:
            self._locks.unlock(handle)
            raise
        self._locks.keep(lease, handle)
        return lease

    def renew(self, lease: Lease) -> Lease:
        """``lease``, still held: a flock needs no renewal.

        Raises:
            LeaseLostError: this store does not hold ``lease`` (released, or never).
        """
        if not self._locks.owns(lease):
            raise LeaseLostError(lease.run_id, lease.epoch)
        return lease

    def release(self, lease: Lease) -> None:
        """Let go of ``lease``'s flock if this store holds it."""
        self._locks.release(lease)

    async def is_owned(self, run_id: str) -> bool:
        """Whether anyone holds the run's flock; tried, not kept."""
        if self._locks.holds(run_id):
            return True
        await self._db.read("check owner", self._manifests.require, run_id)
        return await self._locks.call("check owner", self._locks.probe_run, run_id)

    async def read(self, run_id: str) -> ClaimInfo:
        """The last owner in the run's row, and whether its flock is held (tried, not kept)."""
        last = await self._db.read("check owner", self._require_last_owner, run_id)
        alive = await self._locks.call("check owner", self._locks.probe_run, run_id)
        return ClaimInfo(owner=last.owner if last is not None else None, alive=alive)

    # --- the claims rows ---------------------------------------------------------------

    def _record(self, conn: sqlite3.Connection, lease: Lease) -> None:
        """Record ``lease`` (its epoch counted by :func:`_next_epoch`) as the run's claim."""
        sealed = self._codec.seal(
            encode_lease(lease), kind=Kind.LEASE, run_id=lease.run_id, slot="owner"
        )
        conn.execute(
            "INSERT OR REPLACE INTO claims (run_id, epoch, lease) VALUES (?, ?, ?)",
            (lease.run_id, lease.epoch, sealed),
        )

    def _require_last_owner(self, conn: sqlite3.Connection, run_id: str) -> Lease | None:
        self._manifests.require(conn, run_id)
        return self._last_owner(conn, run_id)

    def _last_owner(self, conn: sqlite3.Connection, run_id: str) -> Lease | None:
        """The lease of the run's last claim; None if never claimed or it cannot be read."""
        found = conn.execute("SELECT lease FROM claims WHERE run_id = ?", (run_id,)).fetchone()
        if found is None:
            return None
        where = row(self._location, "claims", run_id)
        try:
            raw = self._codec.open(
                found[0], kind=Kind.LEASE, run_id=run_id, slot="owner", location=where
            )
        except (CorruptedDataError, EncryptionKeyError):
            return None  # the lock is the claim; the row only names its owner
        return decode_lease(raw, where)


def _next_epoch(conn: sqlite3.Connection, run_id: str) -> int:
    """The epoch a new owner of the run gets."""
    found = conn.execute("SELECT epoch FROM claims WHERE run_id = ?", (run_id,)).fetchone()
    return (found[0] if found is not None else 0) + 1


def _fence(conn: sqlite3.Connection, lease: Lease | None) -> None:
    """Refuse a write of an owner that a newer one took the run from.

    Raises:
        LeaseLostError: the claims row names a newer epoch than ``lease``'s.
    """
    if lease is None:
        return  # not an owner (tools, tests): never fenced
    found = conn.execute("SELECT epoch FROM claims WHERE run_id = ?", (lease.run_id,))
    epoch = found.fetchone()
    if epoch is not None and epoch[0] != lease.epoch:
        raise LeaseLostError(lease.run_id, lease.epoch)
