"""The ``Store`` protocol every backend implements, and its small value types.

Every store (memory, file, S3) passes one conformance suite
(``actorflow.testing.conformance``, which a store of your own can run too), so
code written against this protocol works unchanged on each. All methods are
async and safe to call concurrently from many tasks; each either completes
durably or raises a ``StorageError``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

import msgspec

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._records import (
        LogRecord,
        RunManifest,
        RunStatus,
        Snapshot,
        SnapshotInfo,
    )

__all__ = [
    "Lease",
    "PruneReport",
    "RetentionPolicy",
    "Store",
    "StoreContext",
    "SupportsBlobSync",
    "SupportsSnapshotSync",
    "UnreadableEntry",
    "put_unsynced_blob",
    "sync_blobs",
    "update_run_unsynced",
]


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """Proof that ``owner`` holds ``run_id``; ``epoch`` grows with every new owner.

    ``expires`` is a wall-clock deadline for stores whose leases time out
    (S3); ``None`` where the operating system ends the claim with the
    process (file store's ``flock``) or with the store (memory), or where
    ``worker`` names the lease of the store that holds the run (S3 since
    0.4: one lease per store, renewed for all its runs at once); 0.0 once
    released.

    .. versionchanged:: 0.4
       ``worker``.
    """

    run_id: str
    owner: str
    epoch: int
    expires: float | None = None
    worker: str | None = None


class RetentionPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """What ``prune`` keeps.

    Attributes:
        keep_last: newest snapshots kept per run (``None``: all).
        keep_per_phase: if true, ``keep_last`` counts per phase instead of per run.
        max_age: seconds; older snapshots go, except each run's newest one.
        delete_completed: delete finished runs' data, leaving a tombstone manifest.
        max_total_bytes: size budget for the whole store; oldest snapshots of
            finished runs go first, then of others, never a run's newest one.
        keep_phase_ends: keep the snapshot at the end of each phase (the ones
            ``fork`` starts a run from the middle with) beside ``keep_last``'s,
            while the run is younger than ``max_age``; always without one. The
            size budget may still take them.

    .. versionchanged:: 0.2
       ``keep_phase_ends``, on by default: a finished run can be forked from any phase's end.
    """

    keep_last: int | None = 5
    keep_per_phase: bool = False
    max_age: float | None = None
    delete_completed: bool = False
    max_total_bytes: int | None = None
    keep_phase_ends: bool = True


class PruneReport(msgspec.Struct, kw_only=True):
    """What one ``prune`` removed."""

    snapshots_deleted: int = 0
    log_records_deleted: int = 0
    blobs_deleted: int = 0
    runs_deleted: int = 0
    bytes_freed: int = 0


class UnreadableEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Something among a store's runs that is not a readable run, so ``list_runs`` skips it.

    A damaged manifest, one encrypted with a key the store was not given, a
    folder or object whose name is not a run id, or a run's data without its
    manifest. ``actorflow validate`` lists them.

    Attributes:
        location: the file, folder or object (a path, or an ``s3://`` URL).
        problem: what is wrong with it, and what to do about it.
        run_id: the run it belongs to, when its name is a run id.
        key_id: for a manifest encrypted with a key the store was not given
            (or a wrong one), that key's id: the run is sound, only sealed.
        schedule_id: for a damaged schedule definition, the schedule's id.

    .. versionadded:: 0.2

    .. versionchanged:: 0.6
       ``schedule_id``: damaged schedule definitions are named too.
    """

    location: str
    problem: str
    run_id: str | None = None
    key_id: str | None = None
    schedule_id: str | None = None


@runtime_checkable
class Store(Protocol):
    """Where runs live: manifests, the decision log, state blobs and snapshots."""

    # --- lifecycle ---------------------------------------------------------

    async def aclose(self) -> None:
        """Release files, locks and connections. Idempotent."""
        ...

    # --- manifests ---------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Store ``manifest`` unless the run exists.

        Returns:
            The stored manifest and ``True`` if this call created it, or the
            existing manifest and ``False``.
        """
        ...

    async def read_run(self, run_id: str) -> RunManifest:
        """The run's manifest.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """Atomically replace the manifest with ``change(current)`` and return it.

        ``change`` may run more than once (compare-and-swap stores retry it),
        so it must be a pure function of its argument. With ``durable=False``
        the new manifest must still replace the old one atomically (a reader
        sees one or the other), but a power loss may bring back the old one:
        the runtime passes it where losing the change costs nothing: the log
        already holds it (a finished run's end), or the run's claim made it
        safe to lose (a recovery's take of an orphan).

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """Manifests of every run, optionally filtered, oldest first.

        What cannot be read as a run (a damaged manifest, one encrypted with
        a key the store was not given, a stray entry) is skipped with a
        ``run_unreadable`` warning naming it, so one bad entry never hides the
        others; a store that is an :class:`UnreadableLister` lists them.
        """
        ...

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """Delete the run's log, blobs and snapshots; return the bytes freed.

        With ``tombstone`` the manifest stays (marked ``tombstone=True``, with
        its status and result) so the id can never start a second run.
        """
        ...

    # --- decision log ------------------------------------------------------

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append ``records`` durably and return the log's new length.

        The position of ``records[i]`` is ``length_before + i``. Concurrent
        appends to one run are serialised; a file store shares one fsync
        among every append waiting at the time (group commit).
        """
        ...

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """Records from position ``start`` (absolute, also after pruning) to the end.

        A torn tail (an incomplete or corrupt last record) is not returned.
        Records before ``start`` are not checked: a damaged one there (one a
        checkpoint covers) is stepped over when where it ends is certain.

        Raises:
            LogCorruptedError: a record at or after ``start`` is corrupt (before
                the tail), or damage before it hides where those records begin.
            LogPrunedError: ``start`` is below the first record retention kept
                (a ``StorageError``; its ``first`` says where the log starts now).

        .. versionchanged:: 0.4
           ``LogPrunedError`` (a ``StorageError`` as before) for a pruned ``start``.
        """
        ...

    async def log_length(self, run_id: str) -> int:
        """Position just after the last durable record (0 for an empty log)."""
        ...

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """Drop records below ``position`` where the backend can; return how many went."""
        ...

    # --- blobs -------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """Store ``data`` once under its content address and return the address.

        With encryption on, the address is a keyed hash, so equal plaintexts
        in different stores do not show.
        """
        ...

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """The blob's bytes, verified.

        Raises:
            CorruptedDataError: the blob fails its checksum.
            StorageError: no such blob.
        """
        ...

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """Whether the blob exists (not verified)."""
        ...

    async def list_blobs(self, run_id: str) -> list[str]:
        """Addresses of every blob of the run."""
        ...

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """Delete a blob; return the bytes freed (0 if it was absent)."""
        ...

    # --- snapshots ---------------------------------------------------------

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """Encode, check, compress, encrypt and store ``snapshot``; ``list_snapshots`` lists it.

        The snapshot need not be durable when this returns: a store may write
        it without a sync, as long as a reader never sees it half-written
        (a power loss may take it, or leave it failing its checksum), lists
        it with ``durable=False``, and offers ``sync_snapshots``
        (:class:`SupportsSnapshotSync`) to make it durable. A store without
        that method writes every snapshot durably.

        ``update``, if given, changes the manifest in the same write that lists
        the snapshot (a run's final status goes with its final snapshot: one
        durable manifest write instead of two). Like ``update_run``'s
        ``change`` it may run more than once and must be pure.

        Raises:
            CheckpointTooLargeError: over the codec's size limit.
            EncodingError: something in it cannot be encoded.
        """
        ...

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """Load one snapshot, checksum verified before it is decoded.

        Raises:
            CheckpointNotFoundError: no such snapshot.
            CheckpointCorruptedError: it fails its checksum or does not decode.
        """
        ...

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """The run's snapshots, oldest first (by position, then time)."""
        ...

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """Delete one snapshot and mark it deleted in the manifest; return bytes freed.

        The deletion need not survive a power loss: a snapshot deleted just
        before one may be listed again (retention relies on no deletion).
        """
        ...

    # --- ownership ---------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Become the run's only live owner.

        Raises:
            RunLockedError: another live owner holds it.
        """
        ...

    async def renew(self, lease: Lease) -> Lease:
        """Extend a lease that times out; a no-op for OS-held claims.

        Raises:
            LeaseLostError: another owner took the run.
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Give the run up. Idempotent."""
        ...

    async def is_owned(self, run_id: str) -> bool:
        """Whether a live owner (this process or another) holds the run."""
        ...

    @property
    def renew_interval(self) -> float | None:
        """Seconds between ``renew`` calls an owner must make, or ``None``."""
        ...

    # --- retention ---------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """Apply ``policy`` to every run in the store; runs off the caller's path."""
        ...


@runtime_checkable
class SupportsSnapshotSync(Protocol):
    """A store whose ``write_snapshot`` may return before the snapshot is durable.

    Such a store lists a snapshot written that way with ``durable=False``
    until ``sync_snapshots`` makes it durable. Stores without this method
    (S3, memory, stores written before it) write every snapshot durably.
    Call it through :func:`sync_snapshots`, which accepts any store.

    .. versionadded:: 0.2
    """

    async def sync_snapshots(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """Make the run's snapshots ``snapshot_ids`` durable (listed ``durable=True``).

        Blocks until they are, and is idempotent. Retention calls it before
        it relies on a snapshot: before cutting the log below it, deleting
        the durable snapshots before it, or collecting blobs on its strength.

        Raises:
            CheckpointNotFoundError: one of them does not exist.
        """
        ...


@runtime_checkable
class SupportsBlobSync(Protocol):
    """A store that can write a blob without a sync and make it durable later.

    The checkpoint actor writes history chunks this way: like the snapshots
    that name them, they need to be durable only before something relies on
    them, and :func:`~actorflow.storage.sync_snapshots` syncs a snapshot's
    chunks before the snapshot itself. Stores without these methods write
    every blob durably. Call them through :func:`put_unsynced_blob` and
    :func:`sync_blobs`, which accept any store.

    .. versionadded:: 0.5
    """

    async def put_blob_unsynced(self, run_id: str, data: bytes) -> str:
        """``put_blob`` without a sync: a power loss may take the blob or leave it torn."""
        ...

    async def sync_blobs(self, run_id: str, addresses: Sequence[str]) -> None:
        """Make the run's blobs at ``addresses`` durable; idempotent.

        Raises:
            StorageError: the run has no such blob.
        """
        ...


class StoreContext:
    """Mixin giving a store ``async with store:``, which closes it on the way out."""

    async def aclose(self) -> None:
        """Release the store's resources (overridden by each store)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


_takes_durable: dict[type, bool] = {}


async def update_run_unsynced(
    store: Store, run_id: str, change: Callable[[RunManifest], RunManifest]
) -> RunManifest:
    """``store.update_run(..., durable=False)``, or a durable update if the store predates it.

    A store written before the keyword existed keeps working: its updates
    are all durable, which is never wrong, only slower.
    """
    kind = type(store)
    takes = _takes_durable.get(kind)
    if takes is None:
        try:
            takes = "durable" in inspect.signature(store.update_run).parameters
        except (TypeError, ValueError):
            takes = False
        _takes_durable[kind] = takes
    if takes:
        return await store.update_run(run_id, change, durable=False)
    return await store.update_run(run_id, change)


async def put_unsynced_blob(store: Store, run_id: str, data: bytes) -> str:
    """``store.put_blob_unsynced`` where the store has it, else a durable ``put_blob``.

    .. versionadded:: 0.5
    """
    if isinstance(store, SupportsBlobSync):
        return await store.put_blob_unsynced(run_id, data)
    return await store.put_blob(run_id, data)


async def sync_blobs(store: Store, run_id: str, addresses: Sequence[str]) -> None:
    """Make blobs durable: ``store.sync_blobs`` where it has one, else nothing.

    A store without the method writes blobs durably already.

    .. versionadded:: 0.5
    """
    if addresses and isinstance(store, SupportsBlobSync):
        await store.sync_blobs(run_id, addresses)
