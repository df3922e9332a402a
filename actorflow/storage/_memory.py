"""MemoryStore: the reference implementation of the ``Store`` protocol.

It seals everything with its codec exactly as durable stores do, so size
limits, encoding errors and copies behave the same (a stored value never
aliases the caller's object). Data lives as long as the store object.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio.lowlevel

from actorflow.errors import (
    CheckpointNotFoundError,
    LeaseLostError,
    LogPrunedError,
    RunLockedError,
    RunNotFoundError,
    ScheduleNotFoundError,
    StorageError,
)
from actorflow.storage._capabilities import ClaimInfo, QueueSlot, SealCheck
from actorflow.storage._envelope import Kind
from actorflow.storage._event_stream import (
    DEFAULT_EVENT_BYTES,
    DEFAULT_READ_LIMIT,
    EventSlice,
    EventStreamWriter,
)
from actorflow.storage._inbox import InboxEntry, open_entry, seal_entry
from actorflow.storage._inbox_check import InboxCheck, open_or_skip
from actorflow.storage._inbox_watch import Wakeups, WakeupWatch
from actorflow.storage._manifests import (
    add_snapshot,
    live_snapshots,
    mark_snapshot,
    matches,
    snapshot_info,
    validate_blob_ref,
    validate_snapshot_id,
)
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage._memory_events import EventRings
from actorflow.storage._protocol import (
    Lease,
    PruneReport,
    RetentionPolicy,
    StoreContext,
    UnreadableEntry,
)
from actorflow.storage._records import SnapshotStatus, validate_run_id
from actorflow.storage._retention import prune as prune_by_policy
from actorflow.storage._schedules import (
    Schedule,
    ScheduleProgress,
    dump_progress,
    dump_schedule,
    load_progress,
    load_schedule,
    validate_schedule_id,
)
from actorflow.storage._sealing import Codec
from actorflow.storage._windows import take_window

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from actorflow.storage._records import (
        LogRecord,
        RunManifest,
        RunStatus,
        Snapshot,
        SnapshotInfo,
    )

__all__ = ["MemoryStore"]


@dataclass
class _Run:
    manifest: bytes
    log: list[bytes] = field(default_factory=list)
    log_start: int = 0
    blobs: dict[str, bytes] = field(default_factory=dict)
    snapshots: dict[str, bytes] = field(default_factory=dict)
    lease: Lease | None = None
    epoch: int = 0
    owner: str | None = None  # who claimed it last, kept after release
    inbox: list[bytes] = field(default_factory=list)
    inbox_ids: dict[str, int] = field(default_factory=dict)  # entry id -> its seq
    inbox_damaged: set[int] = field(default_factory=set)  # seqs warned of (_inbox_check)


class MemoryStore(StoreContext):
    """Every run in this process's memory; for tests and throwaway runs.

    Args:
        codec: how data is sealed (default: ``Codec()``).
        event_bytes: sealed bytes of a run's event stream kept at most (the
            oldest batches go first).

    .. versionchanged:: 0.4
       ``event_bytes``.
    """

    def __init__(
        self, *, codec: Codec | None = None, event_bytes: int = DEFAULT_EVENT_BYTES
    ) -> None:
        self.codec = codec or Codec()
        self._events = EventRings(self.codec, event_bytes)
        self._runs: dict[str, _Run] = {}
        self._order = itertools.count()
        self._created: dict[str, int] = {}
        self._unfinished: set[str] = set()
        self._wakeups = Wakeups()
        # limit key -> (request starts, token spends, their sum): SharedLimits
        self._limits: dict[str, tuple[deque[float], deque[tuple[float, float]], list[float]]] = {}
        self._slots: dict[str, int] = {}  # limit key -> slots held

        self._queue_slots: set[tuple[str, int]] = set()
        self._slot_ends: dict[tuple[str, int], float] = {}  # a timed slot's until
        self._schedules: dict[str, bytes] = {}
        self._progress: dict[str, bytes] = {}

    async def take_limit(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """See :meth:`SharedLimits.take_limit`: one window per key for every runtime using it."""
        starts, tokens, total = self._window(key)
        wait, total[0] = take_window(
            starts,
            tokens,
            total[0],
            per_minute=per_minute,
            tokens_per_minute=tokens_per_minute,
            now=now,
        )
        return wait

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """See :meth:`SharedLimits.spend_limit_tokens`."""
        _, spent, total = self._window(key)
        spent.append((now, tokens))
        total[0] += tokens

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """See :meth:`SharedLimits.take_limit_slot`: slots counted per key."""
        held = self._slots.get(key, 0)
        if held >= slots:
            return None
        self._slots[key] = held + 1
        return key

    def release_limit_slot(self, handle: object) -> None:
        """See :meth:`SharedLimits.release_limit_slot`."""
        assert isinstance(handle, str)
        self._slots[handle] -= 1

    def _window(self, key: str) -> tuple[deque[float], deque[tuple[float, float]], list[float]]:
        window = self._limits.get(key)
        if window is None:
            window = self._limits[key] = (deque(), deque(), [0.0])
        return window

    async def aclose(self) -> None:
        """Nothing to release; kept for the protocol."""

    def _run(self, run_id: str) -> _Run:
        validate_run_id(run_id)
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFoundError(run_id) from None

    def _manifest(self, run_id: str, run: _Run) -> RunManifest:
        return self.codec.load_manifest(run.manifest, run_id=run_id, location=f"memory:{run_id}")

    # --- manifests ----------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """See :meth:`Store.create_run`."""
        await anyio.lowlevel.checkpoint()
        run_id = validate_run_id(manifest.run_id)
        existing = self._runs.get(run_id)
        if existing is not None:
            return self._manifest(run_id, existing), False
        self._runs[run_id] = _Run(manifest=self.codec.dump_manifest(manifest))
        self._created[run_id] = next(self._order)
        if not manifest.status.finished:
            self._unfinished.add(run_id)
        return manifest, True

    async def read_run(self, run_id: str) -> RunManifest:
        """See :meth:`Store.read_run`."""
        await anyio.lowlevel.checkpoint()
        return self._manifest(run_id, self._run(run_id))

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """See :meth:`Store.update_run`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        new = change(self._manifest(run_id, run))
        if new.run_id != run_id:
            raise StorageError("update run", f"change() may not rename run {run_id!r}")
        run.manifest = self.codec.dump_manifest(new)
        if new.status.finished:
            self._unfinished.discard(run_id)
        else:
            self._unfinished.add(run_id)
        return new

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """See :meth:`Store.list_runs`."""
        await anyio.lowlevel.checkpoint()
        manifests = [self._manifest(rid, run) for rid, run in self._runs.items()]
        manifests.sort(key=lambda m: (m.created, self._created[m.run_id]))
        return [m for m in manifests if matches(m, status, workflow)]

    async def list_run_versions(self) -> dict[str, str]:
        """See :meth:`RunVersions.list_run_versions`: a hash of each stored manifest."""
        await anyio.lowlevel.checkpoint()
        return {
            run_id: hashlib.blake2b(run.manifest, digest_size=12).hexdigest()
            for run_id, run in self._runs.items()
        }

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """See :meth:`UnreadableLister.list_unreadable`: nothing else can damage it."""
        await anyio.lowlevel.checkpoint()
        return []

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """See :meth:`Store.delete_run`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        freed = sum(map(len, run.log)) + sum(map(len, run.blobs.values()))
        freed += sum(map(len, run.snapshots.values())) + sum(map(len, run.inbox))
        self._unfinished.discard(run_id)
        self._events.forget(run_id)
        if not tombstone:
            del self._runs[run_id]
            return freed + len(run.manifest)
        stone = make_tombstone(self._manifest(run_id, run))
        self._runs[run_id] = _Run(manifest=self.codec.dump_manifest(stone), epoch=run.epoch)
        self._runs[run_id].lease = run.lease
        return freed

    # --- log -------------------------------------------------------------------

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """See :meth:`Store.append`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        start = run.log_start + len(run.log)
        sealed = [
            self.codec.dump_record(r, run_id=run_id, position=start + i)
            for i, r in enumerate(records)
        ]
        run.log.extend(sealed)
        return start + len(sealed)

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        if start < run.log_start:
            raise LogPrunedError(run_id, run.log_start, start)
        first = start - run.log_start
        return [
            self.codec.load_record(
                data, run_id=run_id, position=first + i + run.log_start, location=f"memory:{run_id}"
            )
            for i, data in enumerate(run.log[first:])
        ]

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        return run.log_start + len(run.log)

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        drop = max(0, min(position, run.log_start + len(run.log)) - run.log_start)
        del run.log[:drop]
        run.log_start += drop
        return drop

    # --- blobs -----------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        address = self.codec.blob_address(data)
        if address not in run.blobs:
            run.blobs[address] = self.codec.dump_blob(data, run_id=run_id)[1]
        return address

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        try:
            sealed = run.blobs[validate_blob_ref(ref)]
        except KeyError:
            raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}") from None
        return self.codec.load_blob(
            sealed, run_id=run_id, address=ref, location=f"memory:{run_id}/blobs/{ref}"
        )

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        await anyio.lowlevel.checkpoint()
        return validate_blob_ref(ref) in self._run(run_id).blobs

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        await anyio.lowlevel.checkpoint()
        return sorted(self._run(run_id).blobs)

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob`."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id).blobs.pop(validate_blob_ref(ref), b"")
        return len(data)

    # --- snapshots -------------------------------------------------------------

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """See :meth:`Store.write_snapshot`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(snapshot.run_id)
        validate_snapshot_id(snapshot.snapshot_id)
        taken = run.snapshots.get(snapshot.snapshot_id)
        if taken is not None:
            self._same_snapshot(snapshot, taken)
        sealed, raw = self.codec.dump_snapshot(snapshot)
        info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
        manifest = add_snapshot(self._manifest(snapshot.run_id, run), info)
        if update is not None:
            manifest = update(manifest)
            if manifest.run_id != snapshot.run_id:
                raise StorageError("write checkpoint", "update() may not rename the run")
        run.manifest = self.codec.dump_manifest(manifest)
        run.snapshots[snapshot.snapshot_id] = sealed
        return info

    def _same_snapshot(self, snapshot: Snapshot, sealed: bytes) -> None:
        location = f"memory:{snapshot.run_id}/snapshots/{snapshot.snapshot_id}"
        self.codec.require_same_snapshot(sealed, snapshot, location=location)

    async def read_snapshot(self, run_id: str, snapshot_id: str) -> Snapshot:
        """See :meth:`Store.read_snapshot`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        sealed = run.snapshots.get(validate_snapshot_id(snapshot_id))
        if sealed is None:
            raise CheckpointNotFoundError(run_id, snapshot_id)
        return self.codec.load_snapshot(
            sealed,
            run_id=run_id,
            snapshot_id=snapshot_id,
            location=f"memory:{run_id}/snapshots/{snapshot_id}",
        )

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        """See :meth:`Store.list_snapshots`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        return [
            s for s in live_snapshots(self._manifest(run_id, run)) if s.snapshot_id in run.snapshots
        ]

    async def delete_snapshot(self, run_id: str, snapshot_id: str) -> int:
        """See :meth:`Store.delete_snapshot`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        data = run.snapshots.pop(validate_snapshot_id(snapshot_id), None)
        if data is None:
            return 0
        manifest = mark_snapshot(self._manifest(run_id, run), snapshot_id, SnapshotStatus.DELETED)
        run.manifest = self.codec.dump_manifest(manifest)
        return len(data)

    # --- inbox ---------------------------------------------------------------

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
        """See :meth:`SupportsInbox.post`: one process, so a repeated id is always caught."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        seq = run.inbox_ids.get(entry_id)
        if seq is not None:
            return self._entry(run_id, run, seq)
        entry = InboxEntry(
            seq=len(run.inbox),
            entry_id=entry_id,
            type=type,
            payload=payload,
            sent=time.time(),
            sender=sender,
            kind=kind,
        )
        run.inbox.append(seal_entry(self.codec, entry, run_id=run_id))
        run.inbox_ids[entry_id] = entry.seq
        self._wakeups.wake(run_id)
        return entry

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        """See :meth:`SupportsInbox.read_inbox`: it never holds an id twice."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        end = len(run.inbox) if stop is None else min(stop, len(run.inbox))
        entries = []
        for seq in range(max(start, 0), end):
            entry = open_or_skip(
                self.codec,
                run.inbox[seq],
                run_id=run_id,
                seq=seq,
                location=_inbox_location(run_id, seq),
                warned=run.inbox_damaged,
            )
            if entry is not None:
                entries.append(entry)
        return entries

    async def check_inbox(self, run_id: str) -> InboxCheck:
        """See :meth:`InboxChecker.check_inbox`.

        .. versionadded:: 0.4
        """
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        check = InboxCheck()
        for seq, data in enumerate(run.inbox):
            where = _inbox_location(run_id, seq)
            check.open(self.codec, data, run_id=run_id, seq=seq, location=where)
        return check

    @contextlib.asynccontextmanager
    async def watch_inbox(self, run_id: str) -> AsyncIterator[WakeupWatch]:
        """See :meth:`SupportsInboxWatch.watch_inbox`: an event set by each post, no polling.

        .. versionadded:: 0.2
        """
        await anyio.lowlevel.checkpoint()
        self._run(run_id)
        yield WakeupWatch(self._wakeups, run_id)

    # --- event stream -------------------------------------------------------------

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        """See :meth:`SupportsEventStream.open_event_stream`: batches kept in memory.

        .. versionadded:: 0.4
        """
        validate_run_id(run_id)
        return self._events.writer(run_id)

    async def read_events(
        self, run_id: str, start: int = 0, *, limit: int = DEFAULT_READ_LIMIT
    ) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events`.

        .. versionadded:: 0.4
        """
        await anyio.lowlevel.checkpoint()
        validate_run_id(run_id)
        return self._events.read(run_id, start, limit)

    def _entry(self, run_id: str, run: _Run, seq: int) -> InboxEntry:
        where = _inbox_location(run_id, seq)
        return open_entry(self.codec, run.inbox[seq], run_id=run_id, seq=seq, location=where)

    async def check_sealed(self, run_id: str) -> SealCheck:
        """See :meth:`SealChecker.check_sealed`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        check = SealCheck()
        where = f"memory:{run_id}"
        check.verify(self.codec, run.manifest, kind=Kind.MANIFEST, part="other", location=where)
        for i, data in enumerate(run.log):
            at = f"{where}/log/{run.log_start + i}"
            check.verify(self.codec, data, kind=Kind.LOG_RECORD, part="records", location=at)
        for sid, data in run.snapshots.items():
            at = f"{where}/snapshots/{sid}"
            check.verify(self.codec, data, kind=Kind.SNAPSHOT, part="snapshots", location=at)
        for ref, data in run.blobs.items():
            at = f"{where}/blobs/{ref}"
            check.verify(self.codec, data, kind=Kind.BLOB, part="blobs", location=at)
        for seq, data in enumerate(run.inbox):
            at = f"{where}/inbox/{seq}"
            check.verify(self.codec, data, kind=Kind.INBOX_ENTRY, part="other", location=at)
        return check

    # --- ownership -------------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """See :meth:`Store.claim`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        if run.lease is not None:
            raise RunLockedError(run_id, run.lease.owner)
        run.epoch += 1
        run.lease = Lease(run_id=run_id, owner=owner, epoch=run.epoch)
        run.owner = owner
        return run.lease

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`Store.renew`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(lease.run_id)
        if run.lease != lease:
            raise LeaseLostError(lease.run_id, lease.epoch)
        return lease

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        await anyio.lowlevel.checkpoint()
        run = self._runs.get(lease.run_id)
        if run is not None and run.lease == lease:
            run.lease = None

    async def is_owned(self, run_id: str) -> bool:
        """See :meth:`Store.is_owned`."""
        await anyio.lowlevel.checkpoint()
        return self._run(run_id).lease is not None

    async def read_claim(self, run_id: str) -> ClaimInfo:
        """See :meth:`ClaimInspector.read_claim`."""
        await anyio.lowlevel.checkpoint()
        run = self._run(run_id)
        return ClaimInfo(owner=run.owner, alive=run.lease is not None)

    @property
    def renew_interval(self) -> float | None:
        """``None``: a memory claim lasts until released."""
        return None

    # --- queue slots -----------------------------------------------------------------

    async def take_queue_slot(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """See :meth:`QueueSlots.take_queue_slot`."""
        await anyio.lowlevel.checkpoint()
        for index in range(slots):
            if (queue, index) not in self._queue_slots:
                self._queue_slots.add((queue, index))
                return QueueSlot(queue=queue, index=index, holder=holder)
        return None

    async def take_timed_queue_slot(
        self, queue: str, slots: int, holder: str, *, now: float, until: float
    ) -> QueueSlot | None:
        """See :meth:`TimedQueueSlots.take_timed_queue_slot`: a released slot's end is kept."""
        await anyio.lowlevel.checkpoint()
        for index in range(slots):
            place = (queue, index)
            if place not in self._queue_slots and self._slot_ends.get(place, 0.0) <= now:
                self._queue_slots.add(place)
                self._slot_ends[place] = until
                return QueueSlot(queue=queue, index=index, holder=holder)
        return None

    async def release_queue_slot(self, slot: QueueSlot) -> None:
        """See :meth:`QueueSlots.release_queue_slot`."""
        await anyio.lowlevel.checkpoint()
        self._queue_slots.discard((slot.queue, slot.index))

    # --- schedules -------------------------------------------------------------------

    async def put_schedule(self, schedule: Schedule) -> None:
        """See :meth:`ScheduleStore.put_schedule`."""
        await anyio.lowlevel.checkpoint()
        schedule_id = validate_schedule_id(schedule.schedule_id)
        self._schedules[schedule_id] = dump_schedule(self.codec, schedule)

    async def read_schedule(self, schedule_id: str) -> Schedule:
        """See :meth:`ScheduleStore.read_schedule`."""
        await anyio.lowlevel.checkpoint()
        try:
            data = self._schedules[schedule_id]
        except KeyError:
            raise ScheduleNotFoundError(schedule_id) from None
        location = f"memory:schedule/{schedule_id}"
        return load_schedule(self.codec, data, schedule_id=schedule_id, location=location)

    async def list_schedules(self) -> list[Schedule]:
        """See :meth:`ScheduleStore.list_schedules`."""
        return [await self.read_schedule(schedule_id) for schedule_id in sorted(self._schedules)]

    async def delete_schedule(self, schedule_id: str) -> None:
        """See :meth:`ScheduleStore.delete_schedule`."""
        await anyio.lowlevel.checkpoint()
        if self._schedules.pop(schedule_id, None) is None:
            raise ScheduleNotFoundError(schedule_id)
        self._progress.pop(schedule_id, None)

    async def put_schedule_progress(self, progress: ScheduleProgress) -> None:
        """See :meth:`ScheduleStore.put_schedule_progress`."""
        await anyio.lowlevel.checkpoint()
        self._progress[progress.schedule_id] = dump_progress(self.codec, progress)

    async def read_schedule_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """See :meth:`ScheduleStore.read_schedule_progress`."""
        await anyio.lowlevel.checkpoint()
        data = self._progress.get(schedule_id)
        if data is None:
            return None
        location = f"memory:schedule/{schedule_id}.progress"
        return load_progress(self.codec, data, schedule_id=schedule_id, location=location)

    # --- the index of unfinished runs ---------------------------------------------

    async def list_unfinished(self, *, unowned: bool = False) -> list[str]:
        """See :meth:`RunIndex.list_unfinished`."""
        await anyio.lowlevel.checkpoint()
        return [
            run_id
            for run_id in self._unfinished
            if not unowned or (run := self._runs.get(run_id)) is None or run.lease is None
        ]

    async def unindex(self, run_id: str) -> None:
        """See :meth:`RunIndex.unindex`."""
        await anyio.lowlevel.checkpoint()
        self._unfinished.discard(run_id)

    async def reindex(self) -> int:
        """See :meth:`RunIndex.reindex`."""
        # read before the listing: a run created while it runs keeps its entry
        before = set(self._unfinished)
        unfinished = {m.run_id for m in await self.list_runs() if not m.status.finished}
        doomed = (self._unfinished & before) - unfinished
        added = unfinished - self._unfinished
        self._unfinished = (self._unfinished - doomed) | unfinished
        return len(added) + len(doomed)

    # --- retention -------------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """See :meth:`Store.prune`."""
        return await prune_by_policy(self, policy)


def _inbox_location(run_id: str, seq: int) -> str:
    return f"memory:{run_id}/inbox/{seq}"
