"""What a SqliteStore holds while its process lives: ``flock``s in a folder beside the file.

SQLite's own locks last one transaction, so a claim that lasts a run's
attempt is a lock the operating system ends with its process, as in the file
store. Layout, beside ``<file>``::

    <file>-locks/runs/<run id>       flock'ed by the run's live owner
    <file>-locks/.queues/<q>.<k>     slot k of queue q, held by a worker; a timed
                                     slot's file holds when its minute ends
                                     (the file store's ``SlotLocks``)
    <file>-locks/limits/<key>.<n>    concurrency slot n of a limit key
    <file>-locks/wake/<run id>       a FIFO posts write a byte to (see _wake)

The files are empty but for timed slots' ends; only their locks mean
anything, so deleting the folder while no process uses the store loses at
most a dead worker's ``per_minute`` slots. Every method but
:meth:`LockFolder.call` blocks: the store runs them in a worker thread
through ``call``, which names what the operating system refused
(``release_limit_slot`` closes a descriptor, which never waits).
"""

from __future__ import annotations

import errno
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, TypeVar

from actorflow.errors import StorageError, StoreReadOnlyError
from actorflow.storage.file._fs import OSFileSystem
from actorflow.storage.file._layout import os_error_text
from actorflow.storage.file._queues import SlotLocks
from actorflow.storage.file._threads import run_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._protocol import Lease

__all__ = ["LockFolder"]

T = TypeVar("T")

_live: weakref.WeakSet[LockFolder] = weakref.WeakSet()


def _forget_in_child() -> None:
    # the file layer closed the child's copies of the locks; its stores forget them
    for folder in list(_live):
        folder.forget_all()


os.register_at_fork(after_in_child=_forget_in_child)


class LockFolder:
    """The locks of one store, and the ones it holds."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.root = f"{db_path}-locks"
        self._fs = OSFileSystem()
        self._mutex = threading.Lock()
        self._held: dict[str, tuple[Lease, int]] = {}
        self._created: dict[str, tuple[Lease, int]] = {}  # claimed by create_run
        self.queue_slots = SlotLocks(self._fs, self.root)
        """The queues' slots, as the file store keeps them."""
        self._made: set[str] = set()
        _live.add(self)

    async def call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the files beside the database, in a worker thread.

        Raises:
            StoreReadOnlyError: this process may not write there.
            StorageError: the operating system refused otherwise.
        """
        try:
            return await run_in_thread(fn, *args)
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise StoreReadOnlyError(self.db_path, operation) from exc
            raise StorageError(operation, os_error_text(exc)) from exc

    def path(self, part: str, name: str, *, make: bool = True) -> str:
        """The lock file ``name`` in ``part`` (its folder made on first use, with ``make``)."""
        folder = os.path.join(self.root, part)
        if make and folder not in self._made:
            self._fs.makedirs(folder)
            self._made.add(folder)
        return os.path.join(folder, name)

    # --- runs -----------------------------------------------------------------------

    def try_run(self, run_id: str) -> int | None:
        """Take the run's flock: its handle, or None if a live owner holds it. Blocks."""
        return self._fs.try_lock(self.path("runs", run_id))

    def probe_run(self, run_id: str) -> bool:
        """Whether anyone (this store too) holds the run's flock; tried, never kept. Blocks."""
        # a folder never made holds no lock: a probe makes nothing (a read-only store)
        return self.holds(run_id) or self._fs.is_locked(self.path("runs", run_id, make=False))

    def unowned(self, run_ids: list[str]) -> list[str]:
        """The runs of ``run_ids`` whose flock nobody holds; each tried, never kept. Blocks."""
        return [run_id for run_id in run_ids if not self.probe_run(run_id)]

    def unlock(self, handle: int) -> None:
        """Drop a flock taken by :meth:`try_run`."""
        self._fs.unlock(handle)

    def keep(self, lease: Lease, handle: int) -> None:
        """Hold a claim just taken."""
        with self._mutex:
            self._held[lease.run_id] = (lease, handle)

    def keep_created(self, lease: Lease, handle: int) -> None:
        """Hold a claim ``create_run`` took for the owner its manifest names."""
        with self._mutex:
            self._created[lease.run_id] = (lease, handle)

    def adopt_created(self, run_id: str, owner: str) -> Lease | None:
        """The claim taken at creation if it is ``owner``'s (else it is let go)."""
        with self._mutex:
            held = self._created.pop(run_id, None)
            if held is None:
                return None
            if held[0].owner == owner and run_id not in self._held:
                self._held[run_id] = held
                return held[0]
        self._fs.unlock(held[1])
        return None

    def holds(self, run_id: str) -> bool:
        """Whether this store holds the run (claimed, or claimed at creation)."""
        return run_id in self._held or run_id in self._created

    def lease(self, run_id: str) -> Lease | None:
        """The lease this store holds on the run, if any."""
        held = self._held.get(run_id) or self._created.get(run_id)
        return held[0] if held is not None else None

    def owns(self, lease: Lease) -> bool:
        """Whether this store holds ``lease`` (claimed, and not released since)."""
        held = self._held.get(lease.run_id)
        return held is not None and held[0] == lease

    def release(self, lease: Lease) -> None:
        """Let go of ``lease``'s flock if this store holds it."""
        with self._mutex:
            held = self._held.get(lease.run_id)
            if held is None or held[0] != lease:
                return
            del self._held[lease.run_id]
        self._fs.unlock(held[1])

    def drop(self, run_id: str) -> None:
        """Let go of whatever this store holds of the run (it lost it, or it was deleted)."""
        with self._mutex:
            gone = [h for h in (self._held.pop(run_id, None), self._created.pop(run_id, None)) if h]
        for _lease, handle in gone:
            self._fs.unlock(handle)

    def sweep_runs(self, keep: set[str]) -> int:
        """Remove the lock files of runs not in ``keep`` that nobody holds; how many went.

        Each is taken first and removed under its lock, so a claimer that
        opened it meanwhile takes the file made anew (see ``OSFileSystem``).
        """
        folder = os.path.join(self.root, "runs")
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return 0
        removed = 0
        for name in names:
            if name in keep or self.holds(name):
                continue
            path = os.path.join(folder, name)
            handle = self._fs.try_lock(path)
            if handle is not None:
                self._fs.unlock_and_remove(handle, path)
                removed += 1
        return removed

    # --- queue and limit slots -----------------------------------------------------------

    def take_limit_slot(self, key: str, slots: int) -> int | None:
        """Hold the flock of one of ``key``'s slots: its handle, or None if all are held."""
        for n in range(slots):
            handle = self._fs.try_lock(self.path("limits", f"{key}.{n}"))
            if handle is not None:
                return handle
        return None

    def release_limit_slot(self, handle: int) -> None:
        """Drop a limit slot's flock."""
        self._fs.unlock(handle)

    # --- the end --------------------------------------------------------------------

    def forget_all(self) -> None:
        """Hold nothing, without unlocking: in a forked child, whose locks are its parent's."""
        self._held.clear()
        self._created.clear()
        self.queue_slots.forget()
        self._mutex = threading.Lock()

    def release_all(self) -> None:
        """Let go of every claim and slot (the store closes)."""
        with self._mutex:
            handles = [h for _, h in [*self._held.values(), *self._created.values()]]
            self._held.clear()
            self._created.clear()
        for handle in handles:
            self._fs.unlock(handle)
        self.queue_slots.release_all()
