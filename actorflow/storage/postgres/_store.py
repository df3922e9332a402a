"""PostgresStore: runs kept in PostgreSQL tables (extra ``postgres``, psycopg 3).

Tables (in the store's schema; see ``_schema.py``)::

    af_meta                 the schema's version
    af_runs                 one row per run: sealed manifest, log start and end, inbox end,
                            the claim's epoch and last owner, its advisory-lock key
    af_unfinished           the index of unfinished runs (RunIndex)
    af_log                  one row per record: (run, position) -> sealed record
    af_blobs                (run, address) -> sealed blob (states, history chunks)
    af_snapshots            (run, id) -> its listing entry and the sealed snapshot
    af_inbox                (run, seq) -> sealed entry; (run, entry id) unique
    af_events               the ephemeral event stream's batches
    af_limits               SharedLimits' windows, one row per key, locked to take
    af_schedules, af_schedule_progress     schedules (with af_limits: ``_shared.py``)
    af_queue_ends           when timed queue slots' minutes end

Every row holds bytes sealed by the same :class:`Codec` as the file and S3
stores (checksums, compression, encryption). Each write is one transaction
that locks the run's row: an append reads the log's end and the claim's epoch
under that lock, so appends never interleave and an owner whose claim was
taken over is refused (``LeaseLostError``) in the same transaction it wrote
in. Claims, queue slots and limit slots are session advisory locks
(``_locks.py``): the server frees them when the holder's connection ends, so
a killed worker's runs can be taken at once. Posts wake watches, and
submitted or given-up runs wake idle workers, through LISTEN/NOTIFY
(``_notify.py``).

The class is a facade over one module per part: runs' rows and the index
(``_runs.py``), the log (``_log.py``), snapshots (``_snapshots.py``), blobs,
the inbox, the event stream, claims (``_claims.py``), slots, budgets and
schedules; what the store knows of the runs it owns is shared by them
(``_owned.py``), and so are an owned run's snapshots and chunks waiting
for its next append (``_waiting.py``).
"""

from __future__ import annotations

import contextlib
import urllib.parse
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from actorflow.errors import StoreUnavailableError
from actorflow.storage._event_stream import DEFAULT_EVENT_BYTES, DEFAULT_READ_LIMIT
from actorflow.storage._protocol import Lease, StoreContext, UnreadableEntry
from actorflow.storage._records import validate_run_id
from actorflow.storage._retention import prune as prune_by_policy
from actorflow.storage._sealing import Codec
from actorflow.storage.postgres._blobs import BlobRows
from actorflow.storage.postgres._claims import Claims
from actorflow.storage.postgres._db import Database, describe_dsn
from actorflow.storage.postgres._events import EventRows
from actorflow.storage.postgres._inbox import InboxRows
from actorflow.storage.postgres._locks import Locks
from actorflow.storage.postgres._log import LogRows
from actorflow.storage.postgres._notify import (
    WORK_KEY,
    Listener,
    SocketWatch,
    Wakeups,
)
from actorflow.storage.postgres._owned import OwnedRuns
from actorflow.storage.postgres._runs import RunRows
from actorflow.storage.postgres._schema import validate_schema_name
from actorflow.storage.postgres._sealcheck import check_run
from actorflow.storage.postgres._shared import LimitRows, ScheduleRows
from actorflow.storage.postgres._slots import SlotLocks
from actorflow.storage.postgres._snapshots import SnapshotRows
from actorflow.storage.postgres._waiting import WaitingRows

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from actorflow.storage._capabilities import ClaimInfo, QueueSlot, SealCheck
    from actorflow.storage._event_stream import EventSlice, EventStreamWriter
    from actorflow.storage._inbox import InboxEntry
    from actorflow.storage._inbox_check import InboxCheck
    from actorflow.storage._protocol import PruneReport, RetentionPolicy
    from actorflow.storage._records import (
        LogRecord,
        RunManifest,
        RunStatus,
        Snapshot,
        SnapshotInfo,
    )
    from actorflow.storage._schedules import Schedule, ScheduleProgress

__all__ = ["PostgresStore"]


def _split_schema(dsn: str) -> tuple[str, str | None]:
    """The DSN without a ``schema`` query parameter (libpq knows none), and its value."""
    if "://" not in dsn or "?" not in dsn:
        return dsn, None
    parts = urllib.parse.urlsplit(dsn)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    # quote, not quote_plus: libpq reads a + in a URL as a plus, not a space
    kept = urllib.parse.urlencode(
        [(k, v) for k, v in query if k != "schema"], quote_via=urllib.parse.quote
    )
    return urllib.parse.urlunsplit(parts._replace(query=kept)), schema


class PostgresStore(StoreContext):
    """A store in a PostgreSQL database, shared by every process that can reach it.

    Works on asyncio and trio: queries run on a small pool of psycopg's
    synchronous connections in worker threads. The schema is created (and
    later upgraded) by the store on first use. Every optional capability is
    offered: the index of unfinished runs, claim inspection, seal checks,
    the inbox and its watch (LISTEN/NOTIFY), the event stream, exact shared
    limits and queue slots (row and advisory locks), schedules.

    Args:
        dsn: a libpq URL (``postgresql://user:pass@host:5432/db``) or key=value
            string. A URL may carry ``?schema=name`` (the ``schema`` argument).
        schema: the schema the store's tables live in (default ``actorflow``),
            so several stores can share a database.
        codec: sealing options (compression, encryption, limits); default ``Codec()``.
        pool_size: connections for queries (and concurrent queries) per store;
            the store also keeps one for its locks and one to listen.
        connect_timeout: seconds one connection attempt may take.
        connect_attempts: attempts (with backoff) before ``StoreUnavailableError``.
        event_bytes: sealed bytes of a run's event stream kept at most.
        snapshot_delay: seconds a snapshot or history chunk of a run this
            store owns may wait to be written with the run's next log append
            (one commit for both) before a commit of its own; 0 writes each
            at once. Until written, only this store object sees it.

    Raises:
        StoreUnavailableError: psycopg is missing (``pip install 'actorflow[postgres]'``);
            on first use, also a server that stays unreachable or refuses the login.
        StoreSchemaError: on first use, a schema written by a newer actorflow, one
            holding tables that are not a store's, or a role that may not create it.
        ConfigurationError: ``schema`` is not a plain lower-case name.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        codec: Codec | None = None,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        connect_attempts: int = 8,
        event_bytes: int = DEFAULT_EVENT_BYTES,
        snapshot_delay: float = 0.05,
    ) -> None:
        dsn, in_url = _split_schema(dsn)
        if snapshot_delay < 0:
            raise ValueError(f"snapshot_delay must not be negative, not {snapshot_delay!r}")
        self.schema = validate_schema_name(schema or in_url or "actorflow")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size!r}")
        self.dsn = dsn
        self.codec = codec if codec is not None else Codec()
        self._db = Database(
            dsn,
            self.schema,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            connect_attempts=connect_attempts,
        )
        self._place = f"{describe_dsn(dsn)}?schema={self.schema}"
        self._locks = Locks(self._db)
        self._wakeups = Wakeups()
        self._channel = f"af_{self.schema}"
        self._listener = Listener(self._db, self._channel, self._wakeups, self._locks.ping)
        self._events = EventRows(self._db, self.codec, event_bytes, self._place)
        self._limits = LimitRows(self._db)
        self._slots = SlotLocks(self._locks, self.schema, self._listener.start)
        self._blobs = BlobRows(self._db, self.codec, self._where)
        self._inbox = InboxRows(self._db, self.codec, self._where, self._channel)
        self._schedules = ScheduleRows(self._db, self.codec, self._place)
        self._owned = OwnedRuns(self._locks, self.schema)
        self._waiting = WaitingRows(self._db, self.codec, self._owned, snapshot_delay)
        self._runs = RunRows(
            self._db,
            self.codec,
            self._owned,
            self._locks,
            self._waiting,
            self._where,
            place=self._place,
            channel=self._channel,
            started=self._listener.start,
        )
        self._records = LogRows(self._db, self.codec, self._owned, self._waiting, self._where)
        self._claims = Claims(self._db, self._locks, self._owned, self._listener.start)
        self._snapshots = SnapshotRows(
            self._db, self.codec, self._owned, self._waiting, self._runs, self._where
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self._place!r})"

    @property
    def location(self) -> str:
        """Where the store is: the DSN without its password, and the schema."""
        return self._place

    def _where(self, run_id: str, *parts: object) -> str:
        return "/".join((f"{self._place}#runs/{run_id}", *map(str, parts)))

    @property
    def url(self) -> str | None:
        """The URL that opens this store from another process (``open_store``), with its
        schema; None when it was given a key=value DSN, which no URL names."""
        if "://" not in self.dsn:
            return None
        joiner = "&" if "?" in self.dsn else "?"
        return f"{self.dsn}{joiner}schema={self.schema}"

    async def exists(self) -> bool:
        """Whether the schema holds a store already, asked without creating one.

        The CLI's commands ask it first: a mistyped schema is named, not made.

        Raises:
            StoreUnavailableError: the server stays unreachable, or refuses the login.
        """
        return await anyio.to_thread.run_sync(self._db.holds_store)

    async def aclose(self) -> None:
        """Stop listening, free every claim and slot, close the connections. Idempotent."""
        if self._owned.closed:
            return
        with anyio.CancelScope(shield=True):
            await self._waiting.stop()
        self._owned.closed = True
        with anyio.CancelScope(shield=True):

            def stop(token: str) -> None:
                self._db.call(
                    "close",
                    lambda c, _: c.execute("SELECT pg_notify(%s, %s)", (self._channel, token)),
                )

            await anyio.to_thread.run_sync(self._listener.stop, stop)
            await anyio.to_thread.run_sync(self._locks.close)
            await anyio.to_thread.run_sync(self._db.close)
        self._owned.leases.clear()
        self._owned.created.clear()

    # --- manifests --------------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """See :meth:`Store.create_run`; exactly one of racing creators gets ``True``.

        A new running run whose manifest names an ``owner`` is claimed for it
        in the same call, as in the file and SQLite stores: the owner's
        ``claim`` then costs no round trip.
        """
        return await self._runs.create(manifest)

    async def read_run(self, run_id: str) -> RunManifest:
        """See :meth:`Store.read_run`."""
        return await self._runs.read(run_id)

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """Replace the manifest under the run's row lock: ``change`` runs once per try.

        With ``durable=False`` the transaction commits without waiting for its
        WAL flush (``synchronous_commit = off``): atomic, but a crash of the
        server may take it.

        Raises:
            LeaseLostError: this store claimed the run and another owner took it.
        """
        return await self._runs.update(run_id, change, durable=durable)

    async def list_run_versions(self) -> dict[str, str]:
        """See :meth:`RunVersions.list_run_versions`: each row's creation order and version
        (one query; a run deleted and made again under its id is a new row)."""
        return await self._runs.list_versions()

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """See :meth:`Store.list_runs` (oldest first by ``created``, then creation order)."""
        return await self._runs.list_runs(status=status, workflow=workflow)

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """See :meth:`UnreadableLister.list_unreadable`: manifests that cannot be read.

        And rows of the index of unfinished runs that name no run id, and damaged
        schedule definitions.
        """
        unreadable = await self._runs.list_unreadable()
        return unreadable + (await self._schedules.scan())[1]

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """See :meth:`Store.delete_run`: one transaction; a tombstone keeps the run's row."""
        freed = await self._runs.delete(run_id, tombstone=tombstone)
        self._inbox.forget(run_id)
        return freed

    # --- decision log -------------------------------------------------------------

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append ``records`` in one transaction under the run's row lock; the new length.

        A connection lost mid-commit is replaced and the append tried again:
        it first looks for its own records (by a batch id on the first one),
        so a commit that landed is never written twice.

        Raises:
            LeaseLostError: this store claimed the run and another owner took it.
        """
        return await self._records.append(run_id, records)

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`; a commit is whole, so no tail is ever torn."""
        return await self._records.read(run_id, start)

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        return await self._records.length(run_id)

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`: the rows go, positions stay absolute."""
        return await self._records.truncate_before(run_id, position)

    # --- blobs --------------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`: one INSERT, durable when it returns."""
        return await self._blobs.put(run_id, data, durable=True)

    async def put_blob_unsynced(self, run_id: str, data: bytes) -> str:
        """See :meth:`SupportsBlobSync.put_blob_unsynced`: committed without a WAL flush.

        A run this store owns has it written with its next log append instead
        (see ``snapshot_delay``).
        """
        return self._waiting.defer_blob(run_id, data) or await self._blobs.put(
            run_id, data, durable=False
        )

    async def sync_blobs(self, run_id: str, addresses: Sequence[str]) -> None:
        """See :meth:`SupportsBlobSync.sync_blobs`: one synchronous commit flushes them.

        Raises:
            StorageError: the run has no such blob.
        """
        await self._waiting.settle(run_id)
        await self._blobs.sync(run_id, addresses)

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`."""
        await self._waiting.settle(run_id)
        return await self._blobs.get(run_id, ref)

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        await self._waiting.settle(run_id)
        return await self._blobs.has(run_id, ref)

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        await self._waiting.settle(run_id)
        return await self._blobs.list(run_id)

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob`."""
        await self._waiting.settle(run_id)
        return await self._blobs.delete(run_id, ref)

    # --- snapshots ----------------------------------------------------------------

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """See :meth:`Store.write_snapshot`: the row and ``update``'s manifest in one commit.

        Without ``update`` the commit does not wait for its WAL flush
        (``synchronous_commit = off``): the snapshot is listed ``durable=False``
        until :meth:`sync_snapshots`. A crash of the server may take it whole;
        it is never seen half-written. With ``update`` (a run's end) it is durable.

        Raises:
            StorageError: the run already holds a different snapshot with this id.
            LeaseLostError: this store claimed the run and another owner took it.
        """
        return await self._snapshots.write(snapshot, update=update)

    async def sync_snapshots(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """See :meth:`SupportsSnapshotSync.sync_snapshots`: one synchronous commit.

        Marking them durable is a write whose commit waits for the WAL flush,
        which makes every earlier commit durable too (the snapshots' and their
        history chunks').

        Raises:
            CheckpointNotFoundError: one of them does not exist.
        """
        await self._snapshots.sync(run_id, snapshot_ids)

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """See :meth:`Store.read_snapshot`; verified and decoded in the worker thread."""
        return await self._snapshots.read(run_id, snapshot_id)

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """See :meth:`Store.list_snapshots`: the rows' entries, no snapshot opened."""
        return await self._snapshots.list(run_id)

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """See :meth:`Store.delete_snapshot`."""
        return await self._snapshots.delete(run_id, snapshot_id)

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
        """See :meth:`SupportsInbox.post`: one transaction; its commit notifies the watches.

        A repeated ``entry_id`` (also from another process) returns the entry
        stored first: the pair (run, entry id) is unique.
        """
        return await self._inbox.post(
            run_id, entry_id=entry_id, type=type, payload=payload, sender=sender, kind=kind
        )

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        """See :meth:`SupportsInbox.read_inbox`: one query; a damaged entry is skipped."""
        return await self._inbox.read(run_id, start, stop)

    async def check_inbox(self, run_id: str) -> InboxCheck:
        """See :meth:`InboxChecker.check_inbox`."""
        return await self._inbox.check(run_id)

    @contextlib.asynccontextmanager
    async def watch_inbox(self, run_id: str) -> AsyncIterator[SocketWatch]:
        """See :meth:`SupportsInboxWatch.watch_inbox`: pushed by LISTEN/NOTIFY, no polling.

        The store's listener thread starts with the first watch; a post's
        commit (from any process) wakes every watch of the run.
        """
        await self.read_run(run_id)
        await self._listening("watch inbox")
        watch = SocketWatch(self._wakeups, run_id)
        try:
            yield watch
        finally:
            watch.close()

    @contextlib.asynccontextmanager
    async def watch_work(self) -> AsyncIterator[SocketWatch]:
        """See :meth:`WorkWatch.watch_work`: a run created ``queued``, or stored
        ``interrupted`` or ``queued`` again, notifies (LISTEN/NOTIFY) in its commit."""
        await self._listening("watch work")
        watch = SocketWatch(self._wakeups, WORK_KEY)
        try:
            yield watch
        finally:
            watch.close()

    async def _listening(self, operation: str) -> None:
        """Start the listener thread and wait until it listens.

        Raises:
            StoreUnavailableError: it cannot, in the time a connection may take.
        """
        self._listener.start()
        bound = self._db.connect_timeout * self._db.connect_attempts + 1.0
        # only a wait: a cancelled caller (a stopping worker) need not sit it out
        listening = await anyio.to_thread.run_sync(
            self._listener.listening.wait, bound, abandon_on_cancel=True
        )
        if not listening:
            raise StoreUnavailableError(
                operation, f"cannot LISTEN on {self._place}: the server is unreachable"
            )

    # --- event stream -------------------------------------------------------------

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        """See :meth:`SupportsEventStream.open_event_stream`: a row per batch, not durable."""
        validate_run_id(run_id)
        return self._events.writer(run_id)

    async def read_events(
        self, run_id: str, start: int = 0, *, limit: int = DEFAULT_READ_LIMIT
    ) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events`."""
        validate_run_id(run_id)
        got: EventSlice = await self._db.run(
            "read events", lambda conn, _: self._events.read(conn, run_id, start, limit)
        )
        return got

    # --- verification -------------------------------------------------------------

    async def check_sealed(self, run_id: str) -> SealCheck:
        """See :meth:`SealChecker.check_sealed`: every row of the run, nothing decrypted."""
        validate_run_id(run_id)
        await self._waiting.settle(run_id)

        result: SealCheck = await self._db.run(
            "check sealed", lambda conn, _: check_run(conn, self.codec, run_id, self._where)
        )
        return result

    # --- ownership ----------------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """See :meth:`Store.claim`: a session advisory lock, then the epoch goes up by one.

        The lock lives as long as the store's lock connection: a killed
        process's claims end with its connection, at once.

        Raises:
            RunLockedError: a live owner (another process, or this store) holds the run.
        """
        return await self._claims.claim(run_id, owner)

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`Store.renew`: nothing to extend; checks the claim still stands.

        Raises:
            LeaseLostError: another owner took the run, or this store's lock on
                it was lost with its connection and taken meanwhile.
        """
        return await self._claims.renew(lease)

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        await self._claims.release(lease)

    async def is_owned(self, run_id: str) -> bool:
        """See :meth:`Store.is_owned`: whether any session holds the run's lock."""
        return await self._claims.is_owned(run_id)

    async def read_claim(self, run_id: str) -> ClaimInfo:
        """See :meth:`ClaimInspector.read_claim`: the last owner; alive while its lock is held."""
        return await self._claims.read(run_id)

    @property
    def renew_interval(self) -> float | None:
        """``None``: a claim lasts as long as the store's connection, like a file lock."""
        return None

    # --- limits (SharedLimits: exact, one locked row per key) -------------------------

    async def take_limit(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """See :meth:`SharedLimits.take_limit`: the key's window, under its row lock.

        Every process shares one window per key, exactly (not split).
        """
        return await self._limits.take(
            key, per_minute=per_minute, tokens_per_minute=tokens_per_minute, now=now
        )

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """See :meth:`SharedLimits.spend_limit_tokens`."""
        await self._limits.spend(key, tokens, now=now)

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """See :meth:`SharedLimits.take_limit_slot`: one of ``slots`` advisory locks."""
        return await self._slots.take_limit(key, slots)

    def release_limit_slot(self, handle: object) -> None:
        """See :meth:`SharedLimits.release_limit_slot`: the lock goes without waiting."""
        assert isinstance(handle, int)
        self._slots.release_limit(handle)

    # --- queue slots ------------------------------------------------------------

    async def take_queue_slot(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """See :meth:`QueueSlots.take_queue_slot`: an advisory lock, freed with the session."""
        return await self._slots.take_queue(queue, slots, holder)

    async def take_timed_queue_slot(
        self, queue: str, slots: int, holder: str, *, now: float, until: float
    ) -> QueueSlot | None:
        """See :meth:`TimedQueueSlots.take_timed_queue_slot`: ``until`` in ``af_queue_ends``.

        A slot whose lock is free but whose last holder's minute has not ended
        (it died, or gave the slot back) stays counted until then.
        """
        return await self._slots.take_queue(queue, slots, holder, timed=(now, until))

    async def release_queue_slot(self, slot: QueueSlot) -> None:
        """See :meth:`QueueSlots.release_queue_slot`."""
        if not self._owned.closed:
            await self._slots.release_queue(slot)

    # --- schedules --------------------------------------------------------------

    async def put_schedule(self, schedule: Schedule) -> None:
        """See :meth:`ScheduleStore.put_schedule`."""
        await self._schedules.put(schedule)

    async def read_schedule(self, schedule_id: str) -> Schedule:
        """See :meth:`ScheduleStore.read_schedule`."""
        return await self._schedules.read(schedule_id)

    async def list_schedules(self) -> list[Schedule]:
        """See :meth:`ScheduleStore.list_schedules`: one that cannot be read is skipped."""
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
        """See :meth:`RunIndex.list_unfinished`: one query; ``unowned`` leaves out runs
        whose advisory lock a session holds (read from ``pg_locks`` once)."""
        return await self._runs.list_unfinished(unowned=unowned)

    async def unindex(self, run_id: str) -> None:
        """See :meth:`RunIndex.unindex`."""
        await self._runs.unindex(run_id)

    async def reindex(self) -> int:
        """See :meth:`RunIndex.reindex`: from every manifest, in one transaction."""
        return await self._runs.reindex()

    # --- retention ----------------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """See :meth:`Store.prune`."""
        return await prune_by_policy(self, policy)
