"""A PostgresStore's claims: a session advisory lock per run, and the epoch in its row.

The lock lives as long as the store's lock connection (``_locks.py``): a
killed process's claims end with its connection, at once. Taking a claim
moves the run's epoch on under the run's fence lock, held exclusively, so a
snapshot written under the old epoch (which holds it shared) commits before
or is refused after; every write of an owner checks the epoch
(``OwnedRuns.fence``). A claim also learns the log's end, which the owner's
appends then name (``_log.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from actorflow.errors import LeaseLostError, RunLockedError, RunNotFoundError
from actorflow.storage._capabilities import ClaimInfo
from actorflow.storage._protocol import Lease
from actorflow.storage._records import validate_run_id
from actorflow.storage.postgres._locks import HELD_KEYS

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage.postgres._db import Connection, Database
    from actorflow.storage.postgres._locks import Locks
    from actorflow.storage.postgres._owned import OwnedRuns

__all__ = ["Claims"]


class Claims:
    """The runs this store claims, through its :class:`Locks`.

    Args:
        db: the store's connections.
        locks: the store's lock connection and the keys it holds.
        owned: the runs this store owns (a claim's lease and log end go there).
        started: called before a run is claimed (the store starts its listener,
            whose ticks check the lock connection).
    """

    def __init__(
        self, db: Database, locks: Locks, owned: OwnedRuns, started: Callable[[], None]
    ) -> None:
        self._db = db
        self._locks = locks
        self._owned = owned
        self._started = started
        self._claiming: dict[str, str] = {}  # claims under way, with their owners

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Take the run's lock, then its epoch up by one: the new lease."""
        validate_run_id(run_id)
        held = self._owned.leases.get(run_id)
        if held is not None:
            raise RunLockedError(run_id, held.owner)
        if run_id in self._claiming:  # two tasks of this process claiming at once: one wins
            raise RunLockedError(run_id, self._claiming[run_id])
        key = self._owned.key(run_id)
        created = self._owned.created.pop(run_id, None)
        if created is not None:
            if created.owner == owner and self._locks.holds(key):
                self._owned.leases[run_id] = created
                self._owned.log_end[run_id] = 0
                return created
            if created.owner != owner:
                self._locks.unlock_soon(key)  # taken for its manifest's owner: not this one
        fence = self._owned.fence_key(run_id)
        locks = self._locks
        took = False

        def take(conn: Connection) -> tuple[int, int]:
            nonlocal took
            # taken by an earlier try of this claim, which then lost its connection: the
            # reconnection took it again, or another session had it meanwhile (lost)
            mine = locks.holds(key) if took else locks.try_lock(conn, key)
            took = took or mine
            if not mine:
                row = conn.execute(
                    "SELECT owner FROM af_runs WHERE run_id = %s", (run_id,)
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                raise RunLockedError(run_id, row[0])
            with conn.pipeline(), conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (fence,))
                row = conn.execute(
                    "UPDATE af_runs SET epoch = epoch + 1, owner = %s WHERE run_id = %s "
                    "RETURNING epoch, log_end",
                    (owner, run_id),
                ).fetchone()
            if row is None:
                locks.unlock(conn, key)
                raise RunNotFoundError(run_id)
            return int(row[0]), int(row[1])

        self._started()  # its ticks keep the lock connection checked
        self._claiming[run_id] = owner
        try:
            epoch, end = await anyio.to_thread.run_sync(locks.call, "claim run", take)
        finally:
            del self._claiming[run_id]
        lease = Lease(run_id=run_id, owner=owner, epoch=epoch)
        self._owned.leases[run_id] = lease
        # the log's end as of the new epoch: appends of other owners are fenced from now on
        self._owned.log_end[run_id] = end
        return lease

    async def renew(self, lease: Lease) -> Lease:
        """Check the claim still stands (see :meth:`PostgresStore.renew`)."""
        run_id = lease.run_id

        def epoch(conn: Connection, retried: bool) -> int | None:
            row = conn.execute("SELECT epoch FROM af_runs WHERE run_id = %s", (run_id,)).fetchone()
            return int(row[0]) if row is not None else None

        current = await self._db.run("renew", epoch)
        if (
            current != lease.epoch
            or self._owned.leases.get(run_id) != lease
            or self._owned.lost(run_id)
        ):
            if self._owned.leases.get(run_id) == lease:
                del self._owned.leases[run_id]
            raise LeaseLostError(run_id, lease.epoch)
        return lease

    async def release(self, lease: Lease) -> None:
        """Give the run's lock up, if ``lease`` is this store's (even when cancelled)."""
        if self._owned.leases.get(lease.run_id) != lease:
            return
        # rows still waiting are written by the flusher, under the epoch they carry
        self._owned.forget(lease.run_id)
        key = self._owned.key(lease.run_id)
        locks = self._locks
        if self._owned.closed:
            return
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(
                locks.call, "release run", lambda conn: locks.unlock(conn, key)
            )

    async def is_owned(self, run_id: str) -> bool:
        """Whether any session holds the run's lock."""
        return (await self.read(run_id)).alive is True

    async def read(self, run_id: str) -> ClaimInfo:
        """The run's last owner, and whether its lock is held."""
        validate_run_id(run_id)

        def read(conn: Connection, retried: bool) -> ClaimInfo:
            row = conn.execute(
                f"SELECT owner, lock_key IN ({HELD_KEYS}) FROM af_runs WHERE run_id = %s",
                (run_id,),
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            return ClaimInfo(owner=row[0], alive=bool(row[1]) or run_id in self._owned.leases)

        info: ClaimInfo = await self._db.run("read claim", read)
        return info
