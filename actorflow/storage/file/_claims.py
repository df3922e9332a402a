"""A file store's claims on runs: an exclusive ``flock`` per run, and the file naming its owner.

The flock is the claim: the operating system ends it with its process, so it
needs no renewal. The ``owner`` file beside it only names the owner (and its
epoch) for ``RunLockedError`` and ``actorflow runs``; it stays after its owner
is gone, naming the process that held the run last.

A forked child (``multiprocessing``'s default on Linux) holds none of its
parent's claims: the file layer closes the child's copies of the locks, and
the child's stores forget them, so a dead owner never looks alive because a
child of it lives on.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING

from actorflow.errors import CorruptedDataError, EncryptionKeyError, LeaseLostError, RunLockedError
from actorflow.storage._capabilities import ClaimInfo
from actorflow.storage._codec import decode_lease, encode_lease
from actorflow.storage._protocol import Lease
from actorflow.storage._sealing import Kind
from actorflow.storage.file._fs import write_atomic

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["Claims"]

_live: weakref.WeakSet[Claims] = weakref.WeakSet()


def _forget_in_child() -> None:
    for claims in list(_live):
        claims.forget_all()


os.register_at_fork(after_in_child=_forget_in_child)


class Claims:
    """The runs this store holds, each a lease and the handle of its flock.

    Methods that block say so; the store calls them from worker threads.
    """

    def __init__(self, folders: RunFolders, codec: Codec) -> None:
        self._folders = folders
        self._fs = folders.fs
        self._codec = codec
        self._held: dict[str, tuple[Lease, int]] = {}
        # new runs claimed by create_run for the owner their manifest names
        self._created: dict[str, tuple[Lease, int]] = {}
        _live.add(self)

    # --- taking and probing locks (blocking) ---------------------------------------

    def take(self, run_id: str, owner: str) -> tuple[Lease, int]:
        """Take the run's flock and name ``owner`` with the next epoch. Blocks.

        Raises:
            RunNotFoundError: no such run.
            RunLockedError: someone holds it.
        """
        self._folders.require(run_id)
        handle = self._fs.try_lock(self._folders.run(run_id, "lock"))
        if handle is None:
            previous = self._read_lease(run_id)
            raise RunLockedError(run_id, previous.owner if previous else None)
        try:
            previous = self._read_lease(run_id)
            lease = Lease(run_id=run_id, owner=owner, epoch=(previous.epoch if previous else 0) + 1)
            sealed = self._codec.seal(
                encode_lease(lease), kind=Kind.LEASE, run_id=run_id, slot="owner"
            )
            # The flock is the claim and dies with its process; this file only
            # names the owner for `RunLockedError`, so it needs no fsync.
            write_atomic(self._fs, self._folders.run(run_id, "owner"), sealed, durable=False)
        except BaseException:
            self._fs.unlock(handle)
            raise
        return lease, handle

    def take_new(self, run_id: str, owner: str) -> tuple[Lease, int] | None:
        """Take a run just created for ``owner``; None if someone probes it right now. Blocks."""
        try:
            return self.take(run_id, owner)
        except RunLockedError:
            return None  # someone probing it this very moment: the owner's claim will tell

    def _read_lease(self, run_id: str) -> Lease | None:
        path = self._folders.run(run_id, "owner")
        try:
            data = self._fs.read(path)
            raw = self._codec.open(
                data, kind=Kind.LEASE, run_id=run_id, slot="owner", location=path
            )
        except (FileNotFoundError, CorruptedDataError):
            return None  # the lock itself is the claim; the lease file only names it
        return decode_lease(raw, path)

    def probe(self, run_id: str) -> bool:
        """Whether someone holds the run's flock (tried, never kept). Blocks."""
        self._folders.require(run_id)
        return self._fs.is_locked(self._folders.run(run_id, "lock"))

    def inspect(self, run_id: str, held: bool) -> ClaimInfo:
        """The owner file's owner, and whether a live process holds the flock. Blocks.

        ``held``: this store holds the run (its own flock would not show).
        The flock is only tried, never kept: a live owner's lock is untouched.
        """
        alive = held or self.probe(run_id)
        try:
            lease = self._read_lease(run_id)
        except EncryptionKeyError:
            lease = None  # the lock tells liveness; only the owner's name is sealed
        return ClaimInfo(owner=lease.owner if lease else None, alive=alive)

    # --- what this store holds (on the event loop) ------------------------------------

    def keep_created(self, run_id: str, held: tuple[Lease, int]) -> None:
        """Hold a claim ``create_run`` took for the owner its manifest names."""
        self._created[run_id] = held

    def adopt_created(self, run_id: str, owner: str) -> tuple[Lease | None, bool]:
        """The claim taken at creation, if it is ``owner``'s; whether one was let go.

        A claim taken at creation for someone else is released.
        """
        held = self._created.pop(run_id, None)
        if held is None:
            return None, False
        if held[0].owner == owner and run_id not in self._held:
            self._held[run_id] = held
            return held[0], False
        self._fs.unlock(held[1])  # claimed at creation for someone else: let go
        return None, True

    def keep(self, run_id: str, held: tuple[Lease, int]) -> None:
        """Hold a claim just taken."""
        self._held[run_id] = held

    def holds(self, run_id: str) -> bool:
        """Whether this store holds the run (claimed, or claimed at creation)."""
        return run_id in self._held or run_id in self._created

    def owns(self, lease: Lease) -> bool:
        """Whether this store holds ``lease`` (claimed, and not released since)."""
        held = self._held.get(lease.run_id)
        return held is not None and held[0] == lease

    def renew(self, lease: Lease) -> Lease:
        """``lease`` if this store still holds it.

        Raises:
            LeaseLostError: it does not.
        """
        if not self.owns(lease):
            raise LeaseLostError(lease.run_id, lease.epoch)
        return lease

    def release(self, lease: Lease) -> None:
        """Let go of ``lease`` (its flock), if this store holds it."""
        if self.owns(lease):
            _lease, handle = self._held.pop(lease.run_id)
            self._fs.unlock(handle)

    def forget_all(self) -> None:
        """Hold nothing, without unlocking: in a forked child, whose locks are its parent's."""
        self._held.clear()
        self._created.clear()

    def release_all(self) -> None:
        """Let go of every claim (the store closes)."""
        for _lease, handle in [*self._held.values(), *self._created.values()]:
            self._fs.unlock(handle)
        self._held.clear()
        self._created.clear()
