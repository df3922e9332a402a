"""FileStore: runs in a local folder; the embedded default.

The store is a facade over small collaborators, each owning one part of a
run's folder (layout in :mod:`._layout`): manifests (:mod:`._manifests`),
claims (:mod:`._claims`), the log (:mod:`._logs`, group commit in
:mod:`._log`), blobs (:mod:`._blobs`), snapshots (:mod:`._snapshots`) and
the inbox (:mod:`._inbox`).
Every durable operation is one call in a worker thread (:mod:`._threads`);
files written once go through temp file, fsync, rename and folder fsync,
except snapshots: they are off the durability path, written through temp
file and rename alone until ``sync_snapshots`` (see :mod:`._snapshots`).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Any, TypeVar

from actorflow.errors import RunNotFoundError, StorageError
from actorflow.storage._event_stream import DEFAULT_EVENT_BYTES, DEFAULT_READ_LIMIT
from actorflow.storage._logwriter import finishes_when_cancelled
from actorflow.storage._manifests import (
    matches,
    validate_blob_ref,
    validate_snapshot_id,
    warn_unreadable,
)
from actorflow.storage._protocol import StoreContext
from actorflow.storage._records import validate_run_id
from actorflow.storage._retention import prune as prune_by_policy
from actorflow.storage._sealing import Codec
from actorflow.storage.file._blobs import BlobFiles
from actorflow.storage.file._claims import Claims
from actorflow.storage.file._events import EventFiles
from actorflow.storage.file._fs import MAX_FILE_BYTES, FileSystem, OSFileSystem
from actorflow.storage.file._inbox import InboxFiles
from actorflow.storage.file._layout import RunFolders, os_error_text
from actorflow.storage.file._limits import LimitFiles
from actorflow.storage.file._logs import LogFiles
from actorflow.storage.file._manifests import ManifestFiles
from actorflow.storage.file._queues import SlotLocks
from actorflow.storage.file._schedules import ScheduleFiles
from actorflow.storage.file._sealcheck import check_run
from actorflow.storage.file._snapshots import SnapshotFiles
from actorflow.storage.file._sweep import sweep
from actorflow.storage.file._wake import wake, watch

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from actorflow.storage._capabilities import ClaimInfo, QueueSlot, SealCheck
    from actorflow.storage._event_stream import EventSlice, EventStreamWriter
    from actorflow.storage._inbox import InboxEntry
    from actorflow.storage._inbox_check import InboxCheck
    from actorflow.storage._inbox_watch import InboxWatch
    from actorflow.storage._protocol import Lease, PruneReport, RetentionPolicy, UnreadableEntry
    from actorflow.storage._records import (
        LogRecord,
        RunManifest,
        RunStatus,
        Snapshot,
        SnapshotInfo,
    )
    from actorflow.storage._schedules import Schedule, ScheduleProgress

__all__ = ["FileStore"]

T = TypeVar("T")


class FileStore(StoreContext):
    """Runs stored under a local folder (created on first use).

    Args:
        path: the store's folder.
        codec: how data is sealed (default: zstd if installed, else gzip-6).
        segment_bytes: a log segment is closed and a new one started past this size.
        fs: the file layer; tests inject one that simulates power loss.
        event_bytes: about how many bytes of a run's event stream are kept
            (older segments are deleted).

    .. versionchanged:: 0.4
       ``event_bytes``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        codec: Codec | None = None,
        segment_bytes: int = 16 * 1024 * 1024,
        fs: FileSystem | None = None,
        event_bytes: int = DEFAULT_EVENT_BYTES,
    ) -> None:
        self.path = os.fspath(path)
        self.codec = codec or Codec()
        # reads stop short of nothing actorflow writes, and of little else
        most = max(MAX_FILE_BYTES, 2 * self.codec.max_decoded_bytes + segment_bytes)
        self.fs = fs or OSFileSystem(max_file_bytes=most)
        self._folders = RunFolders(self.fs, self.path)
        self._manifests = ManifestFiles(self._folders, self.codec)
        self._claims = Claims(self._folders, self.codec)
        self._logs = LogFiles(self._folders, self.codec, segment_bytes)
        self._blobs = BlobFiles(self._folders, self.codec)
        self._snapshots = SnapshotFiles(self._folders, self._manifests, self.codec)
        self._inbox = InboxFiles(self._folders, self.codec)
        self._events = EventFiles(self._folders, self.codec, event_bytes)
        self._limits = LimitFiles(self.fs, os.path.join(self.path, "limits"))
        self._slots = SlotLocks(self.fs, self.path)
        self._schedules = ScheduleFiles(self.fs, self.path, self.codec)

    def __repr__(self) -> str:
        return f"FileStore({self.path!r}, codec={self.codec.describe()})"

    @property
    def segment_bytes(self) -> int:
        """A log segment is closed and a new one started past this size."""
        return self._logs.segment_bytes

    async def take_limit(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """See :meth:`SharedLimits.take_limit`: ``limits/<key>.budget``, under its flock."""
        # a free lock is taken here, without a trip to a thread: the calls never wait
        taken = _inline(
            "take a limit", self._limits.try_take, key, per_minute, tokens_per_minute, now
        )
        if taken is None:  # another process holds the budget: wait for it in a thread
            taken = await self._folders.call(
                "take a limit", self._limits.take, key, per_minute, tokens_per_minute, now
            )
        return taken[0]

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """See :meth:`SharedLimits.spend_limit_tokens`."""
        if not _inline("spend limit tokens", self._limits.try_spend, key, tokens, now):
            await self._folders.call("spend limit tokens", self._limits.spend, key, tokens, now)

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """See :meth:`SharedLimits.take_limit_slot`: the flock of ``limits/<key>.slot-<n>``."""
        return _inline("take a limit slot", self._limits.take_slot, key, slots)  # never waits

    def release_limit_slot(self, handle: object) -> None:
        """See :meth:`SharedLimits.release_limit_slot`."""
        assert isinstance(handle, int)
        self._limits.release_slot(handle)

    async def aclose(self) -> None:
        """Close log files and release every claim this store holds. Idempotent."""
        self._logs.close()
        self._claims.release_all()
        self._slots.release_all()
        self._limits.close()

    # --- manifests ------------------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """See :meth:`Store.create_run`.

        Raises:
            RunFolderNotEmptyError: the run's folder holds an earlier run's data
                but no manifest; a new run never mixes with it.

        A new run whose manifest names an ``owner`` is claimed for it in the
        same call: no other process can take it for an orphan before its
        owner's ``claim``, which then costs nothing.
        """
        run_id = validate_run_id(manifest.run_id)
        stored, created, held = await self._folders.call(
            "create run", self._create, run_id, manifest
        )
        if held is not None:
            self._claims.keep_created(run_id, held)
            self._logs.mark_empty(run_id)  # and nobody else can write it while we hold it
        return stored, created

    def _create(
        self, run_id: str, manifest: RunManifest
    ) -> tuple[RunManifest, bool, tuple[Lease, int] | None]:
        # one worker-thread trip: the run's files, then its owner's claim
        stored, created = self._manifests.create(run_id, manifest)
        if not created or manifest.owner is None:
            return stored, created, None
        return stored, created, self._claims.take_new(run_id, manifest.owner)

    async def read_run(self, run_id: str) -> RunManifest:
        """See :meth:`Store.read_run`."""
        validate_run_id(run_id)
        return await self._folders.call("read run", self._manifests.read, run_id)

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """See :meth:`Store.update_run`. ``change`` runs in a worker thread.

        Without ``durable`` no fsync at all: the new manifest goes beside the
        durable one (``manifest.unsynced``), which a power loss brings back.
        """
        validate_run_id(run_id)
        return await self._folders.call(
            "update run", self._manifests.change, run_id, change, durable
        )

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """See :meth:`Store.list_runs`: what cannot be read is skipped with a warning."""
        manifests, unreadable = await self._folders.call("list runs", self._manifests.read_all)
        warn_unreadable(unreadable)
        manifests.sort(key=lambda m: (m.created, m.run_id))
        return [m for m in manifests if matches(m, status, workflow)]

    async def list_run_versions(self) -> dict[str, str]:
        """See :meth:`RunVersions.list_run_versions`: each run folder's change time.

        Every manifest write renames a file into its run's folder, which
        changes the folder's time (so do its other files: a version may change
        with the manifest unchanged, never the other way round). A time too
        recent to tell from a second write in the same tick of the file
        system's clock is given as no version (``""``).
        """
        return await self._folders.call("list run versions", self._manifests.versions)

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """See :meth:`UnreadableLister.list_unreadable`: what in ``runs/`` is no readable run.

        And names in the index of unfinished runs (``runs/.unfinished``) that are no run id,
        and damaged schedule definitions in ``.schedules/``.
        """
        _, unreadable = await self._folders.call("list runs", self._manifests.read_all)
        strays = await self._folders.call("list unfinished runs", self._manifests.unfinished.strays)
        schedules = await self._folders.call("list schedules", self._schedules.damaged)
        return unreadable + strays + schedules

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """See :meth:`Store.delete_run`."""
        validate_run_id(run_id)
        self._logs.drop(run_id)
        try:
            return await self._folders.call(
                "delete run", self._manifests.delete_run, run_id, tombstone
            )
        finally:
            self._inbox.forget(run_id)
            self._events.forget(run_id)

    # --- log ------------------------------------------------------------------------

    @finishes_when_cancelled
    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """See :meth:`Store.append`: concurrent appends share one write and fsync.

        Cancelled before the records are queued (waiting to open the log),
        nothing is appended. Once queued, they are written whatever happens
        to the caller: on trio the call then returns normally and the
        cancellation comes at the caller's next checkpoint; on asyncio it
        is raised after the write.
        """
        validate_run_id(run_id)
        log = await self._logs.writer(run_id)
        return await log.append(records)

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`. Never cuts a torn tail: only the writer does.

        A run this store has claimed is read to be appended to (a recovery):
        its log is opened for appends in the same trip, from the same scan.
        """
        validate_run_id(run_id)
        return await self._logs.read(run_id, start, for_append=self._claims.holds(run_id))

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        validate_run_id(run_id)
        return await self._logs.length(run_id)

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`: whole older segments go."""
        validate_run_id(run_id)
        return await self._logs.truncate_before(run_id, position)

    # --- blobs ----------------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`."""
        validate_run_id(run_id)
        return await self._folders.call("put blob", self._blobs.put, run_id, data)

    async def put_blob_unsynced(self, run_id: str, data: bytes) -> str:
        """See :meth:`SupportsBlobSync.put_blob_unsynced`: no fsync until ``sync_blobs``."""
        validate_run_id(run_id)
        return await self._folders.call("put blob", self._blobs.put, run_id, data, False)

    async def sync_blobs(self, run_id: str, addresses: Sequence[str]) -> None:
        """See :meth:`SupportsBlobSync.sync_blobs`."""
        validate_run_id(run_id)
        checked = [validate_blob_ref(a) for a in addresses]
        await self._folders.call("sync blobs", self._blobs.sync, run_id, checked)

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`."""
        validate_run_id(run_id)
        path = self._blobs.path(run_id, validate_blob_ref(ref))
        return await self._folders.call("get blob", self._blobs.get, run_id, ref, path)

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        path = self._blobs.path(run_id, validate_blob_ref(ref))
        return await self._folders.call("has blob", self._blobs.exists, path)

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        return await self._folders.call("list blobs", self._blobs.addresses, run_id)

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob`."""
        path = self._blobs.path(run_id, validate_blob_ref(ref))
        return await self._folders.call("delete blob", self._blobs.delete, path)

    # --- snapshots ------------------------------------------------------------------

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """See :meth:`Store.write_snapshot`: one file whose name lists it, not synced.

        It is written to a temp file and renamed into place, so it is whole
        or absent, but neither it nor its folder is fsynced: it is listed
        ``durable=False`` until :meth:`sync_snapshots`, and a power loss may
        take it or leave it failing its checksum (recovery then uses the one
        before). The manifest is rewritten only for ``update`` or for an
        entry too long for a file name (the older way: listed there, and
        written durably, since the manifest names it). A file that lists
        itself does not depend on the manifest, so with ``update`` both are
        written at once, in two worker threads. The snapshot is encoded,
        compressed and sealed in the worker thread that writes it, off the
        event loop.
        """
        validate_run_id(snapshot.run_id)
        validate_snapshot_id(snapshot.snapshot_id)
        return await self._snapshots.write(snapshot, update)

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """See :meth:`Store.read_snapshot`."""
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        return await self._folders.call(
            "read checkpoint", self._snapshots.read, run_id, snapshot_id
        )

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """See :meth:`Store.list_snapshots`: the folder's names, and older manifest entries."""
        validate_run_id(run_id)
        return await self._folders.call("list checkpoints", self._snapshots.entries, run_id)

    async def sync_snapshots(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """See :meth:`SupportsSnapshotSync.sync_snapshots`: an fsync each, one of the folder.

        Each unsynced file is fsynced and renamed without its ``~unsynced``
        mark, then the folder is fsynced once; durable ones cost nothing.

        .. versionadded:: 0.2
        """
        validate_run_id(run_id)
        for snapshot_id in snapshot_ids:
            validate_snapshot_id(snapshot_id)
        await self._folders.call(
            "sync checkpoints", self._snapshots.sync, run_id, list(snapshot_ids)
        )

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """See :meth:`Store.delete_snapshot`: an unlink, without a folder fsync.

        A power loss may undo it (retention relies on no deletion). A
        snapshot the manifest lists (written the older way) leaves it first.
        """
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        return await self._folders.call(
            "delete checkpoint", self._snapshots.delete, run_id, snapshot_id
        )

    # --- inbox ----------------------------------------------------------------------

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
        """See :meth:`SupportsInbox.post`: a file linked into place at the first free ``seq``.

        Its id's ``flock`` makes a repeated id exact across this machine's
        processes; the entry costs a file fsync and a folder fsync. Then, in
        the same worker thread, a byte to the run's watcher, if one lives
        (see :meth:`watch_inbox`).

        .. versionadded:: 0.2
        """
        validate_run_id(run_id)
        return await self._folders.call(
            "post message", self._post, run_id, entry_id, type, payload, sender, kind
        )

    def _post(
        self,
        run_id: str,
        entry_id: str,
        type_name: str,
        payload: bytes,
        sender: str | None,
        kind: str,
    ) -> InboxEntry:
        entry = self._inbox.post(run_id, entry_id, type_name, payload, sender, kind)
        wake(self._folders, run_id)  # a retried id wakes too: its first post may have died here
        return entry

    @contextlib.asynccontextmanager
    async def watch_inbox(self, run_id: str) -> AsyncIterator[InboxWatch]:
        """See :meth:`SupportsInboxWatch.watch_inbox`: a FIFO in the run's folder, no polling.

        Each post, from this process or another on the machine, writes a byte
        to ``inbox.wake``, a FIFO the watch makes in the run's folder (replacing
        one a killed watcher left) and removes on leaving; the wait is
        ``anyio.wait_readable`` on its read end. Where no FIFO can be made
        (a file layer that is not the operating system's, a file system
        without FIFOs) the watch returns every 0.2 s instead.

        Raises:
            RunNotFoundError: no such run.
            StorageError: the operating system refused to open the FIFO.

        .. versionadded:: 0.2
        """
        validate_run_id(run_id)
        async with watch(self._folders, run_id) as opened:
            yield opened

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        """See :meth:`SupportsInbox.read_inbox`: one file read per entry, no listing.

        .. versionadded:: 0.2
        """
        validate_run_id(run_id)
        return await self._folders.call("read inbox", self._inbox.read, run_id, start, stop)

    async def check_inbox(self, run_id: str) -> InboxCheck:
        """See :meth:`InboxChecker.check_inbox`: every entry file opened, from ``seq`` 0.

        .. versionadded:: 0.4
        """
        validate_run_id(run_id)
        return await self._folders.call("check inbox", self._inbox.check, run_id)

    # --- event stream ----------------------------------------------------------------

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        """See :meth:`SupportsEventStream.open_event_stream`: segments in ``events/``, unsynced.

        Each attempt's writer starts a segment of its own and appends whole
        batches to it, one ``write`` each and no fsync; full segments are
        closed, and the oldest deleted past ``event_bytes``.

        .. versionadded:: 0.4
        """
        validate_run_id(run_id)
        return self._events.writer(run_id)

    async def read_events(
        self, run_id: str, start: int = 0, *, limit: int = DEFAULT_READ_LIMIT
    ) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events`: one worker-thread call.

        The store remembers where each run's last read ended, so a reader
        that follows a run reads only the new part of the newest segment.

        .. versionadded:: 0.4
        """
        validate_run_id(run_id)
        return await self._folders.call("read events", self._events.read, run_id, start, limit)

    async def check_sealed(self, run_id: str) -> SealCheck:
        """See :meth:`SealChecker.check_sealed`: every file of the run, nothing decrypted."""
        validate_run_id(run_id)
        return await self._folders.call("check run", check_run, self._folders, self.codec, run_id)

    # --- ownership ------------------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """See :meth:`Store.claim`: an exclusive ``flock`` held until release or exit."""
        validate_run_id(run_id)
        adopted, let_go = self._claims.adopt_created(run_id, owner)
        if adopted is not None:
            return adopted
        if let_go:
            self._logs.not_empty(run_id)
        held = await self._folders.call("claim run", self._claims.take, run_id, owner)
        self._claims.keep(run_id, held)
        self._logs.forget(run_id)  # others may have appended since: read it afresh
        return held[0]

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`Store.renew`: a claim held by ``flock`` needs no renewal."""
        return self._claims.renew(lease)

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        if self._claims.owns(lease):
            self._logs.not_empty(lease.run_id)
            # while still the owner; and a store that lives long would otherwise
            # hold one open file per run it ever wrote
            self._logs.forget(lease.run_id)
            self._claims.release(lease)

    async def is_owned(self, run_id: str) -> bool:
        """See :meth:`Store.is_owned`: tries the lock without keeping it."""
        validate_run_id(run_id)
        if self._claims.holds(run_id):
            return True
        return await self._folders.call("check owner", self._claims.probe, run_id)

    async def read_claim(self, run_id: str) -> ClaimInfo:
        """See :meth:`ClaimInspector.read_claim`: the owner file, and the flock tried, not kept."""
        validate_run_id(run_id)
        held = self._claims.holds(run_id)
        return await self._folders.call("check owner", self._claims.inspect, run_id, held)

    @property
    def renew_interval(self) -> float | None:
        """``None``: the operating system ends a claim with its process."""
        return None

    # --- the index of unfinished runs ------------------------------------------------

    async def list_unfinished(self, *, unowned: bool = False) -> list[str]:
        """See :meth:`RunIndex.list_unfinished`; ``unowned`` tries each run's flock, not kept."""
        return await self._folders.call("list unfinished runs", self._unfinished, unowned)

    def _unfinished(self, unowned: bool) -> list[str]:
        found = self._manifests.unfinished.list()
        if not unowned:
            return found
        free = []
        for run_id in found:
            if self._claims.holds(run_id):
                continue
            try:
                if not self._claims.probe(run_id):
                    free.append(run_id)
            except RunNotFoundError:
                free.append(run_id)  # a marker made just before its manifest, or left over
        return free

    async def unindex(self, run_id: str) -> None:
        """See :meth:`RunIndex.unindex`."""
        await self._folders.call("unindex run", self._manifests.unfinished.remove, run_id)

    async def reindex(self) -> int:
        """See :meth:`RunIndex.reindex`."""
        index = self._manifests.unfinished
        # read before the manifests: a run created while they are listed keeps its marker
        before = set(await self._folders.call("reindex runs", index.list))
        manifests = await self.list_runs()
        unfinished = {m.run_id for m in manifests if not m.status.finished and not m.tombstone}
        return await self._folders.call("reindex runs", index.reset, unfinished, before)

    # --- queue slots ----------------------------------------------------------------

    async def take_queue_slot(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """See :meth:`QueueSlots.take_queue_slot`."""
        return await self._folders.call("take queue slot", self._slots.take, queue, slots, holder)

    async def take_timed_queue_slot(
        self, queue: str, slots: int, holder: str, *, now: float, until: float
    ) -> QueueSlot | None:
        """See :meth:`TimedQueueSlots.take_timed_queue_slot`: ``until`` in the slot's file."""
        return await self._folders.call(
            "take queue slot", self._slots.take_timed, queue, slots, holder, now, until
        )

    async def release_queue_slot(self, slot: QueueSlot) -> None:
        """See :meth:`QueueSlots.release_queue_slot`."""
        await self._folders.call("release queue slot", self._slots.release, slot)

    # --- schedules ------------------------------------------------------------------

    async def put_schedule(self, schedule: Schedule) -> None:
        """See :meth:`ScheduleStore.put_schedule`."""
        await self._folders.call("store schedule", self._schedules.put, schedule)

    async def read_schedule(self, schedule_id: str) -> Schedule:
        """See :meth:`ScheduleStore.read_schedule`."""
        return await self._folders.call("read schedule", self._schedules.read, schedule_id)

    async def list_schedules(self) -> list[Schedule]:
        """See :meth:`ScheduleStore.list_schedules`."""
        return await self._folders.call("list schedules", self._schedules.list)

    async def delete_schedule(self, schedule_id: str) -> None:
        """See :meth:`ScheduleStore.delete_schedule`."""
        await self._folders.call("delete schedule", self._schedules.delete, schedule_id)

    async def put_schedule_progress(self, progress: ScheduleProgress) -> None:
        """See :meth:`ScheduleStore.put_schedule_progress`."""
        await self._folders.call("store schedule progress", self._schedules.put_progress, progress)

    async def read_schedule_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """See :meth:`ScheduleStore.read_schedule_progress`."""
        return await self._folders.call(
            "read schedule progress", self._schedules.read_progress, schedule_id
        )

    # --- retention ------------------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """See :meth:`Store.prune`; then removes what crashed writers left.

        That is ``.trash-*`` folders of interrupted deletes, and temp files
        older than :data:`~actorflow.storage.file._sweep.TEMP_MAX_AGE`.
        """
        report = await prune_by_policy(self, policy)
        report.bytes_freed += await self._folders.call("prune", sweep, self._folders, time.time())
        return report


def _inline(operation: str, fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn``, which never waits, on the event loop's thread, translating OS errors.

    Raises:
        StorageError: the operating system refused (naming ``operation``).
    """
    try:
        return fn(*args)
    except OSError as exc:
        raise StorageError(operation, os_error_text(exc)) from exc
