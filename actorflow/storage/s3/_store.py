"""S3Store: runs kept as objects in an S3 bucket (extra ``s3``, aioboto3).

Layout under ``{prefix}runs/{run_id}/``::

    manifest                 sealed RunManifest; replaced with If-Match (ETag compare-and-swap)
    lease                    sealed Lease: owner, fencing epoch, expiry     (_lease.py)
    log/{start:020d}         one immutable segment per append; a new owner's first
                             is its take-over record                        (_log.py, _fencing.py)
    log-start                first log position kept after pruning
    blobs/{address}          sealed blob, written once
    snapshots/{entry}        sealed Snapshot, written once; the key is its listing entry
                             (position, time, phase, id, trigger, sizes: _snapshots.py)
    snapshots/{snapshot_id}  the same, written by 0.1 or with an entry too long for a
                             key; listed by the manifest's ``snapshots``
    inbox/{seq:020d}         sealed inbox entry ``seq``, written once   (_inbox.py)
    inbox-ids/{id key}       empty: that entry id was posted

Every object is sealed by the same :class:`Codec` as the file store's (header,
checksum, compression, encryption), so data moves between stores. Segments,
blobs, snapshots and inbox entries are created with ``If-None-Match: *`` and
never edited.
Writing a snapshot is one PUT (the manifest is replaced only for
``write_snapshot(update=)``); listing them is one LIST.
The store is a facade over collaborators: the wire (aioboto3 on asyncio, a
helper thread under trio, retries, errors) in ``_wire.py``; keys and
conditional writes in ``_objects.py``; manifests, blobs, the log, the lease,
snapshots and the inbox each in their own module.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import EncryptionKeyError, LeaseLostError, RunLockedError, StorageError
from actorflow.storage._capabilities import ClaimInfo, SealCheck
from actorflow.storage._manifests import (
    add_snapshot,
    live_snapshots,
    mark_snapshot,
    matches,
    snapshot_info,
    validate_snapshot_id,
    warn_unreadable,
)
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage._protocol import StoreContext
from actorflow.storage._records import RunStatus, SnapshotStatus
from actorflow.storage._retention import prune
from actorflow.storage._sealing import Codec
from actorflow.storage.s3._blobs import BlobObjects
from actorflow.storage.s3._inbox import InboxObjects
from actorflow.storage.s3._index import UnfinishedKeys
from actorflow.storage.s3._lease import LeaseTable
from actorflow.storage.s3._limits import SplitLimits
from actorflow.storage.s3._log import SegmentLog
from actorflow.storage.s3._manifests import ManifestObjects
from actorflow.storage.s3._objects import S3Objects
from actorflow.storage.s3._queues import SlotObjects
from actorflow.storage.s3._schedules import ScheduleObjects
from actorflow.storage.s3._sealcheck import check_run
from actorflow.storage.s3._snapshots import SnapshotObjects, best
from actorflow.storage.s3._wire import S3Options, S3Wire

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from actorflow.storage._capabilities import QueueSlot
    from actorflow.storage._inbox import InboxEntry
    from actorflow.storage._inbox_check import InboxCheck
    from actorflow.storage._inbox_watch import InboxWatch
    from actorflow.storage._protocol import Lease, PruneReport, RetentionPolicy, UnreadableEntry
    from actorflow.storage._records import (
        LogRecord,
        RunManifest,
        Snapshot,
        SnapshotInfo,
    )
    from actorflow.storage._schedules import Schedule, ScheduleProgress

__all__ = ["S3Store"]

_log = get_logger(__name__)


class S3Store(StoreContext):
    """A store in an S3 bucket, or any S3-compatible server with conditional writes.

    The bucket must exist. Works on asyncio and trio (under trio, aioboto3
    runs on an asyncio loop in a helper thread); use one store per event loop.
    The connection opens on first use.

    Args:
        bucket: an existing bucket.
        prefix: key prefix for everything this store writes (``"team/app"``).
        endpoint_url: a non-AWS endpoint (SeaweedFS, MinIO, ...).
        region_name: the bucket's region.
        codec: sealing options (compression, encryption, limits); default ``Codec()``.
        lease_ttl: seconds a lease lives without renewal; owners renew every third.
        aws_access_key_id: credentials; by default boto's chain (environment,
            profile, instance role). Likewise ``aws_secret_access_key``,
            ``aws_session_token`` and ``profile_name``.
        max_attempts: tries per request on throttling, 5xx and connection errors.
        backoff_base: first backoff in seconds; it doubles up to ``backoff_max``
            (full jitter).
        max_connections: HTTP connections (and concurrent requests) per store.
        client_config: extra ``botocore.config.Config`` options.
        inbox_poll_interval: seconds between the polls of an inbox watch
            (:meth:`watch_inbox`), one HEAD each.

    Raises:
        StoreUnavailableError: aioboto3 is missing (``pip install 'actorflow[s3]'``);
            on first use, also a missing bucket, refused credentials, or an
            endpoint that stays unreachable.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        codec: Codec | None = None,
        lease_ttl: float = 30.0,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        profile_name: str | None = None,
        max_attempts: int = 8,
        backoff_base: float = 0.05,
        backoff_max: float = 2.0,
        max_connections: int = 16,
        client_config: Mapping[str, Any] | None = None,
        inbox_poll_interval: float = 0.5,
    ) -> None:
        if not (inbox_poll_interval > 0 and math.isfinite(inbox_poll_interval)):
            raise ValueError(
                f"inbox_poll_interval must be positive and finite, not {inbox_poll_interval!r}"
            )
        options = S3Options(
            bucket=bucket,
            endpoint_url=endpoint_url,
            region_name=region_name,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token,
            profile_name=profile_name,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            max_connections=max_connections,
            client_config=client_config,
        )
        self.bucket = bucket
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        self.codec = codec if codec is not None else Codec()
        objects = S3Objects(S3Wire(options), self.prefix, max_concurrency=max_connections)
        self._objects = objects
        self._manifests = ManifestObjects(objects, self.codec)
        self._log = SegmentLog(objects, self.codec)
        self._leases = LeaseTable(objects, self.codec, lease_ttl)
        self._blobs = BlobObjects(objects, self.codec)
        self._snapshots = SnapshotObjects(objects, self.codec)
        self._inbox = InboxObjects(objects, self.codec)
        self._unfinished = UnfinishedKeys(objects)
        self._limits = SplitLimits(self._leases.workers, refresh=self._leases.ttl / 3)
        self._schedules = ScheduleObjects(objects, self.codec)
        self._slots = SlotObjects(objects, self.codec, self._leases)
        self.inbox_poll_interval = inbox_poll_interval

    def __repr__(self) -> str:
        return f"S3Store({self.bucket!r}, prefix={self.prefix!r})"

    # --- limits (SharedLimits: split across live workers) ----------------------------

    async def take_limit(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """See :meth:`SharedLimits.take_limit`: this process's share of the budget.

        S3 has no lock to share a window under: each process takes the budget
        divided by the live workers (their worker leases), at least one each.
        """
        return await self._limits.take(key, per_minute, tokens_per_minute, now)

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """See :meth:`SharedLimits.spend_limit_tokens` (this process's window)."""
        self._limits.spend(key, tokens, now)

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """See :meth:`SharedLimits.take_limit_slot`: this process's share of the slots."""
        return await self._limits.take_slot(key, slots)

    def release_limit_slot(self, handle: object) -> None:
        """See :meth:`SharedLimits.release_limit_slot`."""
        assert isinstance(handle, str)
        self._limits.release_slot(handle)

    async def aclose(self) -> None:
        """End this store's worker lease, close connections and the helper thread. Idempotent."""
        try:
            with anyio.CancelScope(shield=True):
                await self._leases.workers.release()
        except StorageError as exc:  # it runs out by itself within lease_ttl
            _log.warning("worker_lease_not_released", error=describe(exc))
        finally:
            await self._objects.wire.aclose()

    # --- manifests --------------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """See :meth:`Store.create_run`; exactly one of racing creators gets ``True``."""
        if not manifest.status.finished:
            await self._unfinished.add(manifest.run_id)  # before the manifest: never missing
        stored, created = await self._manifests.create(manifest)
        if created:
            self._snapshots.start_empty(manifest.run_id)
        return stored, created

    async def read_run(self, run_id: str) -> RunManifest:
        """See :meth:`Store.read_run`."""
        manifest, _ = await self._manifests.read(run_id)
        return manifest

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """Replace the manifest by ETag compare-and-swap; ``change`` re-runs on conflict.

        A PUT is durable once acknowledged, so ``durable`` changes nothing here.

        Raises:
            LeaseLostError: this store held the run's lease and another owner took it.
        """
        await self._leases.check(run_id)
        was: list[RunStatus] = []

        def tracked(m: RunManifest) -> RunManifest:
            was.append(m.status)
            return change(m)

        try:
            new = await self._manifests.update(run_id, tracked, epoch=self._leases.epoch(run_id))
        except LeaseLostError:
            self._leases.lose(run_id)
            raise
        if was and new.status.finished != was[-1].finished:
            if new.status.finished:
                await self._unfinished.remove(run_id)
            else:
                await self._unfinished.add(run_id)
        return new

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """See :meth:`Store.list_runs` (oldest first by ``created``, then run id).

        What cannot be read as a run is skipped with a ``run_unreadable`` warning.
        """
        found, unreadable = await self._manifests.read_all()
        warn_unreadable(unreadable)
        manifests = [m for m in found if matches(m, status, workflow)]
        return sorted(manifests, key=lambda m: (m.created, m.run_id))

    async def list_run_versions(self) -> dict[str, str]:
        """See :meth:`RunVersions.list_run_versions`: each manifest's ETag, from a LIST."""
        return await self._manifests.versions()

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """See :meth:`UnreadableLister.list_unreadable`: keys in ``runs/``, no readable run.

        And keys in the index of unfinished runs that name no run id, and damaged
        schedule definitions.
        """
        _, unreadable = await self._manifests.read_all()
        return unreadable + await self._unfinished.strays() + await self._schedules.damaged()

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """See :meth:`Store.delete_run`; with ``tombstone`` the manifest and lease stay."""
        await self._manifests.require(run_id)
        await self._unfinished.remove(run_id)
        o = self._objects
        manifest_key, lease_key = o.key(run_id, "manifest"), o.key(run_id, "lease")
        objects = await o.list_objects("delete run", o.key(run_id, ""))
        doomed = [d for d in objects if not tombstone or d.key not in (manifest_key, lease_key)]
        if tombstone:
            await self.update_run(run_id, make_tombstone)
        await o.delete("delete run", [d.key for d in doomed])
        self._log.forget(run_id)
        self._snapshots.forget(run_id)
        self._inbox.forget(run_id)
        if not tombstone:
            self._manifests.discard(run_id)
            self._leases.forget(run_id)
        return sum(d.size for d in doomed if d.key != lease_key)

    # --- decision log -------------------------------------------------------------

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append ``records`` as one segment object; return the log's new length.

        A cancelled append may or may not have landed (the request may have
        reached the server): the next append looks at the log again instead
        of trusting a cached length, so a late landing is found, never
        overwritten.

        A store that holds the run's lease writes under its epoch: if a newer
        owner has taken the run (its take-over record, or a later segment, is
        where this append meant to write, or ends the log) the append is
        refused, whatever the clocks say.

        Raises:
            LeaseLostError: this store held the run's lease and another owner took it.
        """
        await self._manifests.require(run_id)
        if not records:
            return await self._log.length(run_id)
        await self._leases.check(run_id)
        try:
            return await self._log.append(run_id, records, epoch=self._leases.epoch(run_id))
        except LeaseLostError:
            self._leases.lose(run_id)
            raise

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`; S3 writes are atomic, so no tail is ever torn."""
        await self._manifests.require(run_id)
        return await self._log.read(run_id, start)

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        await self._manifests.require(run_id)
        return await self._log.length(run_id)

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`."""
        await self._manifests.require(run_id)
        return await self._log.truncate_before(run_id, position)

    # --- blobs --------------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`."""
        await self._manifests.require(run_id)
        return await self._blobs.put(run_id, data)

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`."""
        await self._manifests.require(run_id)
        return await self._blobs.get(run_id, ref)

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        await self._manifests.require(run_id)
        return await self._blobs.exists(run_id, ref)

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        await self._manifests.require(run_id)
        return await self._blobs.addresses(run_id)

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob`."""
        await self._manifests.require(run_id)
        return await self._blobs.delete(run_id, ref)

    # --- snapshots ----------------------------------------------------------------

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """See :meth:`Store.write_snapshot`: one PUT, whose key lists the snapshot.

        The manifest is replaced only for ``update`` (after the object is
        stored) or for an entry too long for a key (the older way: listed
        there). Sealing runs in a worker thread.

        Raises:
            StorageError: the run already holds a different snapshot with this id.
            LeaseLostError: this store held the run's lease and another owner took it.
        """
        run_id = snapshot.run_id
        validate_snapshot_id(snapshot.snapshot_id)
        await self._manifests.require(run_id)
        await self._leases.check(run_id)
        sealed, raw = await anyio.to_thread.run_sync(self.codec.dump_snapshot, snapshot)
        info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
        stored, written = await self._snapshots.put(snapshot, info, sealed)
        if stored.info is None:  # at snapshots/{id}: the manifest lists it, as it always did
            listed = (
                (lambda m: add_snapshot(m, info))
                if update is None
                else (lambda m: update(add_snapshot(m, info)))
            )
            await self.update_run(run_id, listed)
        elif update is not None:
            try:
                await self.update_run(run_id, update)
            except BaseException:
                if written:  # not acknowledged: not listed either
                    await self._snapshots.unwrite(run_id, stored)
                raise
        return info

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """See :meth:`Store.read_snapshot`: a GET, after a LIST unless the key is known.

        Verifying and decoding run in a worker thread.
        """
        validate_snapshot_id(snapshot_id)
        await self._manifests.require(run_id)
        return await self._snapshots.read(run_id, snapshot_id)

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """See :meth:`Store.list_snapshots`: one LIST of keys that carry their entries.

        Objects at ``snapshots/{id}`` (written the older way) take their entries
        from the manifest, which is read only when there are such objects.
        """
        listing = await self._snapshots.scan(run_id, "list checkpoints")
        if not listing:
            await self._manifests.require(run_id)  # no run, or no snapshots yet
        entries: dict[str, SnapshotInfo] = {}
        for snapshot_id, found in listing.items():
            if (info := best(found).info) is not None:
                entries[snapshot_id] = info
        if len(entries) < len(listing):
            for info in live_snapshots(await self.read_run(run_id)):
                if info.snapshot_id in listing and info.snapshot_id not in entries:
                    entries[info.snapshot_id] = info
        return sorted(entries.values(), key=lambda s: (s.position, s.created, s.snapshot_id))

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """See :meth:`Store.delete_snapshot`: every object of the id goes (a LIST, a DELETE).

        A snapshot at ``snapshots/{id}`` (written the older way) is then marked
        deleted in the manifest, as before.
        """
        validate_snapshot_id(snapshot_id)
        await self._manifests.require(run_id)
        await self._leases.check(run_id)
        found = (await self._snapshots.scan(run_id, "delete checkpoint")).get(snapshot_id)
        if not found:
            return 0
        await self._objects.delete("delete checkpoint", [s.key for s in found])
        self._snapshots.drop(run_id, snapshot_id)
        if any(s.info is None for s in found):
            await self.update_run(
                run_id, lambda m: mark_snapshot(m, snapshot_id, SnapshotStatus.DELETED)
            )
        return sum(s.size for s in found)

    # --- inbox --------------------------------------------------------------------

    async def post(
        self,
        run_id: str,
        *,
        entry_id: str,
        type: str,
        payload: bytes,
        sender: str | None = None,
        kind: str = "",
    ) -> InboxEntry:
        """See :meth:`SupportsInbox.post`: an id claim, then an entry at the first free ``seq``.

        Both are ``If-None-Match: *`` PUTs. S3 has no locks: a retry racing the
        first post of its id in another process may store it too, and
        ``read_inbox`` leaves out the later one.

        .. versionadded:: 0.2
        """
        await self._manifests.require(run_id)
        return await self._inbox.post(run_id, entry_id, type, payload, sender, kind)

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        """See :meth:`SupportsInbox.read_inbox`: GETs from ``start`` until a 404, no LIST.

        .. versionadded:: 0.2
        """
        await self._manifests.require(run_id)
        return await self._inbox.read(run_id, start, stop)

    async def check_inbox(self, run_id: str) -> InboxCheck:
        """See :meth:`InboxChecker.check_inbox`: GETs from ``seq`` 0 until a 404.

        .. versionadded:: 0.4
        """
        await self._manifests.require(run_id)
        return await self._inbox.check(run_id)

    @contextlib.asynccontextmanager
    async def watch_inbox(self, run_id: str) -> AsyncIterator[InboxWatch]:
        """See :meth:`SupportsInboxWatch.watch_inbox`: it polls, one HEAD a poll.

        S3 cannot push, so ``changed()`` HEADs the entry past the inbox's end
        every ``inbox_poll_interval`` seconds and returns once it exists (a few
        HEADs on entering find the end). Entries this store has read or
        posted since do not wake it again. Nothing to release on leaving.

        .. versionadded:: 0.2
        """
        await self._manifests.require(run_id)
        yield await self._inbox.watch(run_id, self.inbox_poll_interval)

    # --- ownership ----------------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """See :meth:`Store.claim`; of racing claimers exactly one wins.

        A claim that takes the run from an earlier owner (epoch above 1) then
        writes a take-over record at the log's end and stamps its epoch on
        the manifest: from there on, the earlier owner's writes are refused.

        Raises:
            RunLockedError: a live owner holds the run, another claimer won, or
                an even newer owner took the run while this claim took it over.
        """
        await self._manifests.require(run_id)
        lease = await self._leases.claim(run_id, owner)
        if lease.epoch > 1:
            # An earlier owner may have written snapshots this store has not listed.
            self._snapshots.forget(run_id)
            try:
                await self._take_over(lease)
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    await self.release(lease)
                if isinstance(exc, LeaseLostError):
                    raise RunLockedError(run_id) from exc
                raise
        return lease

    async def _take_over(self, lease: Lease) -> None:
        run_id = lease.run_id
        manifest = await self._manifests.update(run_id, lambda m: m, epoch=lease.epoch)
        if not manifest.tombstone:  # a deleted run's log stays deleted: nothing to fence there
            await self._log.take_over(run_id, lease.owner, lease.epoch)

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`Store.renew`."""
        return await self._leases.renew(lease)

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        await self._leases.release(lease)
        self._let_go(lease.run_id)

    def _let_go(self, run_id: str) -> None:
        """Drop what this store keeps about a run it no longer owns.

        Another process may change the run from now on, so these would only
        be guesses; and a long-lived store would otherwise hold them for
        every run it ever ran.
        """
        self._manifests.forget(run_id)
        self._log.forget(run_id)
        self._snapshots.forget(run_id)

    async def is_owned(self, run_id: str) -> bool:
        """See :meth:`Store.is_owned`."""
        await self._manifests.require(run_id)
        return await self._leases.is_owned(run_id)

    async def check_sealed(self, run_id: str) -> SealCheck:
        """See :meth:`SealChecker.check_sealed`: every object of the run, nothing decrypted."""
        await self._manifests.require(run_id)
        return await check_run(self._objects, self.codec, run_id)

    async def read_claim(self, run_id: str) -> ClaimInfo:
        """See :meth:`ClaimInspector.read_claim`: the lease, alive until it expires."""
        await self._manifests.require(run_id)
        try:
            current = await self._leases.read(run_id)
        except EncryptionKeyError:
            return ClaimInfo()  # sealed: neither its owner nor its expiry can be read
        if current is None:
            return ClaimInfo(alive=False)
        lease = current[0]
        expires = await self._leases.expiry(lease)
        alive = expires is not None and expires > time.time()
        return ClaimInfo(owner=lease.owner, alive=alive, expires=expires)

    @property
    def renew_interval(self) -> float | None:
        """A third of ``lease_ttl``: how often the store's one worker lease is renewed."""
        return self._leases.ttl / 3

    # --- queue slots ------------------------------------------------------------

    async def take_queue_slot(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """See :meth:`QueueSlots.take_queue_slot`: held while this store's worker lease lives."""
        return await self._slots.take(queue, slots, holder)

    async def take_timed_queue_slot(
        self, queue: str, slots: int, holder: str, *, now: float, until: float
    ) -> QueueSlot | None:
        """See :meth:`TimedQueueSlots.take_timed_queue_slot`: ``until`` in the slot's object."""
        return await self._slots.take(queue, slots, holder, now=now, until=until)

    async def bind_queue_slot(self, slot: QueueSlot, run_id: str) -> None:
        """See :meth:`FencedQueueSlots.bind_queue_slot`."""
        self._slots.bind(slot, run_id)

    async def release_queue_slot(self, slot: QueueSlot) -> None:
        """See :meth:`QueueSlots.release_queue_slot`."""
        await self._slots.release(slot)

    # --- schedules --------------------------------------------------------------

    async def put_schedule(self, schedule: Schedule) -> None:
        """See :meth:`ScheduleStore.put_schedule`."""
        await self._schedules.put(schedule)

    async def read_schedule(self, schedule_id: str) -> Schedule:
        """See :meth:`ScheduleStore.read_schedule`."""
        return await self._schedules.read(schedule_id)

    async def list_schedules(self) -> list[Schedule]:
        """See :meth:`ScheduleStore.list_schedules`."""
        return await self._schedules.list()

    async def delete_schedule(self, schedule_id: str) -> None:
        """See :meth:`ScheduleStore.delete_schedule`."""
        await self._schedules.delete(schedule_id)

    async def put_schedule_progress(self, progress: ScheduleProgress) -> None:
        """See :meth:`ScheduleStore.put_schedule_progress`."""
        await self._schedules.put_progress(progress)

    async def read_schedule_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """See :meth:`ScheduleStore.read_schedule_progress`."""
        return await self._schedules.read_progress(schedule_id)

    # --- the index of unfinished runs ---------------------------------------------

    async def list_unfinished(self, *, unowned: bool = False) -> list[str]:
        """See :meth:`RunIndex.list_unfinished`: one LIST; ``unowned`` adds one LIST
        and a GET per live worker lease, never a read per run."""
        found = await self._unfinished.list()
        if not unowned:
            return found
        held = await self._leases.workers.held_by_live()
        return [run_id for run_id in found if run_id not in held]

    async def unindex(self, run_id: str) -> None:
        """See :meth:`RunIndex.unindex`."""
        await self._unfinished.remove(run_id)

    async def reindex(self) -> int:
        """See :meth:`RunIndex.reindex`."""
        # read before the manifests: a run created while they are listed keeps its marker
        before = set(await self._unfinished.list())
        manifests = await self.list_runs()
        unfinished = {m.run_id for m in manifests if not m.status.finished and not m.tombstone}
        return await self._unfinished.reset(unfinished, before)

    # --- retention ----------------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """See :meth:`Store.prune`."""
        return await prune(self, policy)
