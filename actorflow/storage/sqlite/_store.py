"""SqliteStore: every run in one SQLite file, for one machine's processes.

The store is a facade over small collaborators, each owning some tables
(layout in :mod:`._schema`): runs, manifests and the index (:mod:`._runs`),
claims (:mod:`._claims`), the log (:mod:`._log`), blobs (:mod:`._blobs`),
snapshots (:mod:`._snapshots`), inboxes (:mod:`._inbox`), event streams
(:mod:`._events`), schedules and budgets (:mod:`._shared`). Connections,
transactions and the group commit are :mod:`._db`; claims, queue and limit
slots are ``flock``s in a folder beside the file (:mod:`._locks`), and inbox
wake-ups FIFOs there (:mod:`._wake`).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import ConfigurationError
from actorflow.storage._codec import encode_record
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
from actorflow.storage.file._threads import run_in_thread
from actorflow.storage.sqlite._blobs import BlobRows
from actorflow.storage.sqlite._claims import Claims
from actorflow.storage.sqlite._db import Database
from actorflow.storage.sqlite._events import EventRows, read_events
from actorflow.storage.sqlite._inbox import InboxRows
from actorflow.storage.sqlite._locks import LockFolder
from actorflow.storage.sqlite._log import LogRows
from actorflow.storage.sqlite._runs import Manifests
from actorflow.storage.sqlite._sealcheck import check_run
from actorflow.storage.sqlite._shared import LimitRows, ScheduleRows
from actorflow.storage.sqlite._snapshots import SnapshotRows
from actorflow.storage.sqlite._wake import poke, watch

if TYPE_CHECKING:
    import sqlite3
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

__all__ = ["SqliteStore"]


class SqliteStore(StoreContext):
    """Runs stored in one SQLite file (created on first use), shared by one machine's processes.

    Works on asyncio and trio: every call runs in a worker thread. The file
    is in WAL mode; a durable write (a log append, a manifest, a post) is
    committed with ``synchronous=FULL``, and concurrent writes share one
    commit. Claims are ``flock``s in ``<file>-locks/`` beside it, which the
    operating system ends with their process.

    Args:
        path: the database file (its folder must exist).
        codec: how data is sealed (default: zstd if installed, else gzip-6).
        busy_timeout: seconds a transaction waits for another process's.
        event_bytes: about how many bytes of a run's event stream are kept
            (older batches are deleted).

    .. versionadded:: 0.6
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        codec: Codec | None = None,
        busy_timeout: float = 30.0,
        event_bytes: int = DEFAULT_EVENT_BYTES,
    ) -> None:
        self.path = os.fspath(path)
        self.codec = codec or Codec()
        self.event_bytes = event_bytes
        self._db = Database(self.path, busy_timeout)
        self._locks = LockFolder(self.path)
        self._manifests = Manifests(self.codec, self.path)
        self._claims = Claims(self._db, self._locks, self._manifests, self.codec, self.path)
        self._log = LogRows(self.codec, self.path)
        self._blobs = BlobRows(self.codec, self.path, self._manifests)
        self._snapshots = SnapshotRows(
            self._db, self.codec, self.path, self._manifests, self._claims
        )
        self._inbox = InboxRows(self.codec, self.path, self._manifests)
        self._schedules = ScheduleRows(self.codec, self.path)
        self._limits = LimitRows()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SqliteStore:
        """The store a ``sqlite:///path`` URL names; ``options`` go to the constructor.

        As in SQLAlchemy, what follows ``sqlite:///`` is the path: relative
        with three slashes (``sqlite:///runs.db``), absolute with four
        (``sqlite:////var/lib/app/runs.db``).

        Raises:
            ConfigurationError: not a ``sqlite:///`` URL with a path, an
                in-memory database (which no second connection could see), or
                a query string (options are keyword arguments).
        """
        scheme, sep, rest = url.partition("://")
        if scheme.lower() != "sqlite" or not sep or not rest.startswith("/") or rest == "/":
            raise ConfigurationError(
                "store location", url, "sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        path = rest[1:]
        if "?" in path:
            raise ConfigurationError(
                "store location",
                url,
                "sqlite:///path without a query (give options as keyword arguments)",
            )
        if path in (":memory:", "") or path.startswith("file:"):
            raise ConfigurationError(
                "store location", url, "a file's path (for a store in memory use memory://)"
            )
        return cls(path, **options)

    @property
    def url(self) -> str:
        """The URL that opens this store elsewhere on this machine (``open_store``): the
        absolute path after ``sqlite:///``, so with four slashes."""
        return "sqlite:///" + os.path.abspath(self.path)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r}, codec={self.codec.describe()})"

    async def aclose(self) -> None:
        """Release every claim and slot this store holds and close the file. Idempotent."""
        self._locks.release_all()
        with anyio.CancelScope(shield=True):
            await run_in_thread(self._db.close)

    # --- manifests ------------------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """See :meth:`Store.create_run`.

        A new run whose manifest names an ``owner`` is claimed for it in the
        same call, as in the file store: no other process can take it for an
        orphan before its owner's ``claim``, which then costs nothing.
        """
        validate_run_id(manifest.run_id)
        return await self._claims.create(manifest)

    async def read_run(self, run_id: str) -> RunManifest:
        """See :meth:`Store.read_run`."""
        validate_run_id(run_id)
        return await self._db.read("read run", self._manifests.read, run_id)

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """See :meth:`Store.update_run`: one transaction; ``change`` runs in the writer thread.

        Without ``durable`` the commit is not synced (a power loss may bring
        back the old manifest, never half of one).

        Raises:
            LeaseLostError: this store held the run and another owner took it since.
        """
        validate_run_id(run_id)

        def update(conn: sqlite3.Connection) -> RunManifest:
            return self._manifests.change(conn, run_id, change)

        return await self._db.write(self._claims.fenced(run_id, update), durable=durable)

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """See :meth:`Store.list_runs`: what cannot be read is skipped with a warning."""
        manifests, unreadable = await self._db.read("list runs", self._manifests.read_all)
        warn_unreadable(unreadable)
        manifests.sort(key=lambda m: (m.created, m.run_id))
        return [m for m in manifests if matches(m, status, workflow)]

    async def list_run_versions(self) -> dict[str, str]:
        """See :meth:`RunVersions.list_run_versions`: a hash of each stored manifest's
        bytes (one query, nothing opened or decoded)."""
        return await self._db.read("list run versions", self._manifests.versions)

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """See :meth:`UnreadableLister.list_unreadable`: rows that are no readable run.

        Manifests that fail their checksum or are sealed with a key the store
        was not given, a run's rows without its manifest, and entries of the
        index of unfinished runs that are no run id, and damaged schedule
        definitions; each named by table and row.
        """

        def scan(conn: sqlite3.Connection) -> list[UnreadableEntry]:
            unreadable = self._manifests.read_all(conn)[1] + self._manifests.strays(conn)
            return unreadable + self._schedules.damaged(conn)

        return await self._db.read("list runs", scan)

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """See :meth:`Store.delete_run`: one transaction."""
        validate_run_id(run_id)

        def delete(conn: sqlite3.Connection) -> int:
            return self._manifests.delete(conn, run_id, tombstone)

        try:
            return await self._db.write(delete, durable=True)
        finally:
            self._inbox.forget(run_id)

    # --- log ------------------------------------------------------------------------

    @finishes_when_cancelled
    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """See :meth:`Store.append`: concurrent appends (of any runs) share one commit.

        Once queued, the records are written whatever happens to the caller:
        on trio the call then returns normally and the cancellation comes at
        the caller's next checkpoint; on asyncio it is raised after the write.

        Raises:
            LeaseLostError: this store held the run and another owner took it since.
        """
        validate_run_id(run_id)
        raws = [encode_record(r) for r in records]  # a bad record fails here, appending nothing

        def append(conn: sqlite3.Connection) -> int:
            return self._log.append(conn, run_id, raws)

        return await self._db.write(self._claims.fenced(run_id, append), durable=True)

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`: commits are whole, so there is never a torn tail."""
        validate_run_id(run_id)
        return await self._db.read("read log", self._log.read, run_id, start)

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        validate_run_id(run_id)
        _, end = await self._db.read("read log", self._log.bounds, run_id)
        return end

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`: the rows below ``position`` go (not synced)."""
        validate_run_id(run_id)
        return await self._db.write(
            lambda conn: self._log.truncate_before(conn, run_id, position), durable=False
        )

    # --- blobs ----------------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`."""
        return await self._put_blob(run_id, data, durable=True)

    async def put_blob_unsynced(self, run_id: str, data: bytes) -> str:
        """See :meth:`SupportsBlobSync.put_blob_unsynced`: committed without a sync."""
        return await self._put_blob(run_id, data, durable=False)

    async def _put_blob(self, run_id: str, data: bytes, *, durable: bool) -> str:
        validate_run_id(run_id)
        address, sealed = await self._blobs.seal(run_id, data)

        def put(conn: sqlite3.Connection) -> str:
            return self._blobs.put(conn, run_id, address, sealed, durable)

        return await self._db.write(put, durable=durable)

    async def sync_blobs(self, run_id: str, addresses: Sequence[str]) -> None:
        """See :meth:`SupportsBlobSync.sync_blobs`: one synced commit, if any is not durable."""
        validate_run_id(run_id)
        checked = [validate_blob_ref(a) for a in addresses]
        if checked:
            await self._db.write(
                lambda conn: self._blobs.mark_durable(conn, run_id, checked), durable=True
            )

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`: verified in the worker thread that reads it."""
        validate_run_id(run_id)
        validate_blob_ref(ref)
        return await self._db.read("get blob", self._blobs.get, run_id, ref)

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        validate_run_id(run_id)
        validate_blob_ref(ref)
        return await self._db.read("has blob", self._blobs.has, run_id, ref)

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        validate_run_id(run_id)
        return await self._db.read("list blobs", self._blobs.addresses, run_id)

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob` (not synced)."""
        validate_run_id(run_id)
        validate_blob_ref(ref)
        return await self._db.write(
            lambda conn: self._blobs.delete(conn, run_id, ref), durable=False
        )

    # --- snapshots ------------------------------------------------------------------

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """See :meth:`Store.write_snapshot`: one row whose name lists it, committed unsynced.

        It is listed ``durable=False`` until :meth:`sync_snapshots`. The
        manifest is rewritten (durably, in the same commit) only for
        ``update`` or for an entry too long for a name (listed there, as in
        the file store). It is encoded, compressed and sealed in the writer
        thread, before the transaction and outside its lock.

        Raises:
            StorageError: the run holds a different snapshot with this id.
            LeaseLostError: this store held the run and another owner took it since.
        """
        validate_run_id(snapshot.run_id)
        validate_snapshot_id(snapshot.snapshot_id)
        return await self._snapshots.write(snapshot, update)

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """See :meth:`Store.read_snapshot`: verified and decoded in the reading thread."""
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        return await self._db.read("read checkpoint", self._snapshots.read, run_id, snapshot_id)

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """See :meth:`Store.list_snapshots`: the rows' names, and older manifest entries."""
        validate_run_id(run_id)
        return await self._db.read("list checkpoints", self._snapshots.entries, run_id)

    async def sync_snapshots(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """See :meth:`SupportsSnapshotSync.sync_snapshots`: one synced commit marks them durable."""
        validate_run_id(run_id)
        ids = [validate_snapshot_id(s) for s in snapshot_ids]
        if ids:
            await self._db.write(
                lambda conn: self._snapshots.mark_durable(conn, run_id, ids), durable=True
            )

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """See :meth:`Store.delete_snapshot`: committed without a sync."""
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        return await self._db.write(
            lambda conn: self._snapshots.delete(conn, run_id, snapshot_id), durable=False
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
        """See :meth:`SupportsInbox.post`: one durable transaction, then a byte to the watcher.

        The id is looked up and the next ``seq`` taken in the same
        transaction, so a repeated id is exact across processes.
        """
        validate_run_id(run_id)

        def post(conn: sqlite3.Connection) -> InboxEntry:
            return self._inbox.post(conn, run_id, entry_id, type, payload, sender, kind)

        # a retried id wakes too: its first post may have died before its wake-up
        return await self._db.write(post, durable=True, after=lambda: poke(self._locks, run_id))

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        """See :meth:`SupportsInbox.read_inbox`: one query from ``start``."""
        validate_run_id(run_id)
        return await self._db.read("read inbox", self._inbox.read, run_id, start, stop)

    async def check_inbox(self, run_id: str) -> InboxCheck:
        """See :meth:`InboxChecker.check_inbox`: every entry opened, from ``seq`` 0."""
        validate_run_id(run_id)
        return await self._db.read("check inbox", self._inbox.check, run_id)

    @contextlib.asynccontextmanager
    async def watch_inbox(self, run_id: str) -> AsyncIterator[InboxWatch]:
        """See :meth:`SupportsInboxWatch.watch_inbox`: a FIFO beside the file, no polling.

        Each post, from this process or another on the machine, writes a byte
        to ``<file>-locks/wake/<run id>``, a FIFO the watch makes (replacing
        one a killed watcher left) and removes on leaving. Where no FIFO can
        be made the watch returns every ``POLL_WITHOUT_FIFO`` seconds instead.

        Raises:
            RunNotFoundError: no such run.
        """
        validate_run_id(run_id)
        await self._db.read("watch inbox", self._manifests.require, run_id)
        async with watch(self._locks, run_id) as watching:
            yield watching

    # --- event stream ---------------------------------------------------------------

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        """See :meth:`SupportsEventStream.open_event_stream`: rows of ``events``, unsynced."""
        validate_run_id(run_id)
        return EventRows(self._db, self.codec, run_id, self.event_bytes)

    async def read_events(
        self, run_id: str, start: int = 0, *, limit: int = DEFAULT_READ_LIMIT
    ) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events`: one query."""
        validate_run_id(run_id)
        return await self._db.read(
            "read events", read_events, self.codec, self.path, run_id, start, limit
        )

    async def check_sealed(self, run_id: str) -> SealCheck:
        """See :meth:`SealChecker.check_sealed`: every row of the run, nothing decrypted."""
        validate_run_id(run_id)
        return await self._db.read(
            "check run", check_run, self.codec, self.path, self._manifests, run_id
        )

    # --- ownership ------------------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """See :meth:`Store.claim`: the run's ``flock``, and its claims row's next epoch.

        Raises:
            RunLockedError: a live owner (in this process or another) holds it.
        """
        validate_run_id(run_id)
        return await self._claims.claim(run_id, owner)

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`Store.renew`: a claim held by ``flock`` needs no renewal.

        Raises:
            LeaseLostError: this store does not hold ``lease`` (released, or never).
        """
        return self._claims.renew(lease)

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        self._claims.release(lease)

    async def is_owned(self, run_id: str) -> bool:
        """See :meth:`Store.is_owned`: tries the run's flock without keeping it."""
        validate_run_id(run_id)
        return await self._claims.is_owned(run_id)

    async def read_claim(self, run_id: str) -> ClaimInfo:
        """See :meth:`ClaimInspector.read_claim`: the claims row, and the flock tried, not kept."""
        validate_run_id(run_id)
        return await self._claims.read(run_id)

    @property
    def renew_interval(self) -> float | None:
        """``None``: the operating system ends a claim with its process."""
        return None

    # --- the index of unfinished runs -----------------------------------------------

    async def list_unfinished(self, *, unowned: bool = False) -> list[str]:
        """See :meth:`RunIndex.list_unfinished`; ``unowned`` tries each run's flock, not kept."""
        found = await self._db.read("list unfinished runs", self._manifests.unfinished)
        if not unowned:
            return found
        return await self._locks.call("list unfinished runs", self._locks.unowned, found)

    async def unindex(self, run_id: str) -> None:
        """See :meth:`RunIndex.unindex`."""
        await self._db.write(lambda conn: self._manifests.unindex(conn, run_id), durable=False)

    async def reindex(self) -> int:
        """See :meth:`RunIndex.reindex`."""
        # read before the manifests: a run created while they are listed keeps its entry
        before = set(await self.list_unfinished())
        manifests = await self.list_runs()
        unfinished = {m.run_id for m in manifests if not m.status.finished and not m.tombstone}
        return await self._db.write(
            lambda conn: self._manifests.reset_index(conn, unfinished, before), durable=False
        )

    # --- limits (SharedLimits) ------------------------------------------------------

    async def take_limit(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """See :meth:`SharedLimits.take_limit`: the key's row, in one transaction."""
        return await self._db.write(
            lambda conn: self._limits.take(conn, key, per_minute, tokens_per_minute, now),
            durable=False,
        )

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """See :meth:`SharedLimits.spend_limit_tokens`."""
        await self._db.write(lambda conn: self._limits.spend(conn, key, tokens, now), durable=False)

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """See :meth:`SharedLimits.take_limit_slot`: the flock of one of the key's slot files."""
        return await self._locks.call("take a limit slot", self._locks.take_limit_slot, key, slots)

    def release_limit_slot(self, handle: object) -> None:
        """See :meth:`SharedLimits.release_limit_slot`."""
        assert isinstance(handle, int)
        self._locks.release_limit_slot(handle)

    # --- queue slots ----------------------------------------------------------------

    async def take_queue_slot(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """See :meth:`QueueSlots.take_queue_slot`: a flock the OS ends with its process."""
        slots_ = self._locks.queue_slots
        return await self._locks.call("take queue slot", slots_.take, queue, slots, holder)

    async def take_timed_queue_slot(
        self, queue: str, slots: int, holder: str, *, now: float, until: float
    ) -> QueueSlot | None:
        """See :meth:`TimedQueueSlots.take_timed_queue_slot`: ``until`` in the slot's file."""
        slots_ = self._locks.queue_slots
        return await self._locks.call(
            "take queue slot", slots_.take_timed, queue, slots, holder, now, until
        )

    async def release_queue_slot(self, slot: QueueSlot) -> None:
        """See :meth:`QueueSlots.release_queue_slot`."""
        await self._locks.call("release queue slot", self._locks.queue_slots.release, slot)

    # --- schedules ------------------------------------------------------------------

    async def put_schedule(self, schedule: Schedule) -> None:
        """See :meth:`ScheduleStore.put_schedule` (durable)."""
        await self._db.write(lambda conn: self._schedules.put(conn, schedule), durable=True)

    async def read_schedule(self, schedule_id: str) -> Schedule:
        """See :meth:`ScheduleStore.read_schedule`."""
        return await self._db.read("read schedule", self._schedules.read, schedule_id)

    async def list_schedules(self) -> list[Schedule]:
        """See :meth:`ScheduleStore.list_schedules`."""
        return await self._db.read("list schedules", self._schedules.list)

    async def delete_schedule(self, schedule_id: str) -> None:
        """See :meth:`ScheduleStore.delete_schedule`."""
        await self._db.write(lambda conn: self._schedules.delete(conn, schedule_id), durable=True)

    async def put_schedule_progress(self, progress: ScheduleProgress) -> None:
        """See :meth:`ScheduleStore.put_schedule_progress` (not synced)."""
        await self._db.write(
            lambda conn: self._schedules.put_progress(conn, progress), durable=False
        )

    async def read_schedule_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """See :meth:`ScheduleStore.read_schedule_progress`."""
        return await self._db.read(
            "read schedule progress", self._schedules.read_progress, schedule_id
        )

    # --- retention ------------------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """See :meth:`Store.prune`; then removes the lock files of finished runs nobody holds.

        The file keeps its size (its free pages are reused).
        """
        report = await prune_by_policy(self, policy)
        unfinished = set(await self.list_unfinished())
        await self._locks.call("prune", self._locks.sweep_runs, unfinished)
        return report
