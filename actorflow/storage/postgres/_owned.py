"""What a PostgresStore knows of the runs it owns, shared by its appends, snapshots and claims.

A claim is a session advisory lock (``_locks.py``) plus an epoch in the
run's row that every write of an owner checks: the leases this store holds
say which epoch that is. For a run it owns the store also knows the log's
end (learnt with the claim, kept by its own appends), so an append goes in
one statement that names it; its appends to one run take one lock around
that knowledge. Snapshots and chunks waiting for the run's next append
(``_deferred.py``) are held here too: a write found fenced drops them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from actorflow.errors import LeaseLostError
from actorflow.storage.postgres._deferred import DeferredWrites
from actorflow.storage.postgres._locks import lock_key

if TYPE_CHECKING:
    from actorflow.storage._protocol import Lease
    from actorflow.storage.postgres._locks import Locks

__all__ = ["OwnedRuns"]


class OwnedRuns:
    """The runs this store claimed: their leases, logs' ends, append locks and waiting rows.

    Args:
        locks: the store's lock connection (a key lost with it fences the run).
        schema: the store's schema (lock keys are per schema).
    """

    def __init__(self, locks: Locks, schema: str) -> None:
        self._locks = locks
        self._schema = schema
        self.leases: dict[str, Lease] = {}
        self.created: dict[str, Lease] = {}  # claimed by create_run for its manifest's owner
        # the log's end of the runs this store owns, and the locks its appends take
        self.log_end: dict[str, int] = {}
        self._append_locks: dict[str, threading.Lock] = {}
        self._append_guard = threading.Lock()
        # snapshots and chunks of owned runs, written with the run's next append
        self.deferred = DeferredWrites()
        self.closed = False
        """The store was closed: nothing waits for an append, nothing is unlocked."""

    def key(self, run_id: str) -> int:
        """The run's advisory-lock key: its claim."""
        return lock_key(self._schema, "run", run_id)

    def fence_key(self, run_id: str) -> int:
        """The transaction lock a claim's epoch change takes exclusively, snapshot writes shared."""
        return lock_key(self._schema, "fence", run_id)

    def lost(self, run_id: str) -> bool:
        """Whether the run's lock was lost with the lock connection and taken meanwhile."""
        return self.key(run_id) in self._locks.lost

    def fence(self, run_id: str, epoch: int) -> None:
        """Refuse a write of a run this store claimed and another owner took since."""
        lease = self.leases.get(run_id)
        if lease is not None and (lease.epoch != epoch or self.lost(run_id)):
            self.deferred.drop(run_id)  # they could never be written
            raise LeaseLostError(run_id, lease.epoch)

    def appending(self, run_id: str) -> threading.Lock:
        """The lock this store's appends to one run take, around the log's known end."""
        with self._append_guard:
            lock = self._append_locks.get(run_id)
            if lock is None:
                lock = self._append_locks[run_id] = threading.Lock()
            return lock

    def forget(self, run_id: str) -> None:
        """A released run: its lease, the log's end and its append lock."""
        del self.leases[run_id]
        self.log_end.pop(run_id, None)
        with self._append_guard:
            self._append_locks.pop(run_id, None)
