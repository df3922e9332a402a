"""What a store may offer besides :class:`~actorflow.storage.Store`: optional capabilities.

Tools (``actorflow validate``, ``actorflow runs``) use a capability when the
store has it (``isinstance(store, ClaimInspector)``) and do without it
otherwise, so a store written against the ``Store`` protocol alone keeps
working, and keeps passing ``isinstance(store, Store)``, when a capability is
added here. Each is one small protocol; the memory, file and S3 stores
implement all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import msgspec

from actorflow.errors import CorruptedDataError

if TYPE_CHECKING:
    import contextlib

    from actorflow.storage._envelope import Kind
    from actorflow.storage._inbox_watch import InboxWatch
    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._schedules import Schedule, ScheduleProgress
    from actorflow.storage._sealing import Codec

__all__ = [
    "ClaimInfo",
    "ClaimInspector",
    "FencedQueueSlots",
    "QueueSlot",
    "QueueSlots",
    "RunIndex",
    "RunVersions",
    "ScheduleStore",
    "SealCheck",
    "SealChecker",
    "SharedLimits",
    "TimedQueueSlots",
    "UnreadableLister",
    "WorkWatch",
]


@runtime_checkable
class UnreadableLister(Protocol):
    """A store that can name what ``list_runs`` skips.

    .. versionadded:: 0.2
    """

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """What ``list_runs`` skips, each entry naming where it is and what is wrong.

        Damaged manifests, manifests encrypted with a key the store was not
        given, entries that are not runs, and run data whose manifest is missing;
        and, in a store that is a :class:`RunIndex`, entries of its index that
        name no run id (which it skips); and, in a store that is a
        :class:`ScheduleStore`, damaged schedule definitions (which
        ``list_schedules`` skips).

        .. versionchanged:: 0.4
           Entries of the index of unfinished runs that name no run id.

        .. versionchanged:: 0.6
           Damaged schedule definitions.
        """
        ...


@runtime_checkable
class RunIndex(Protocol):
    """A store that keeps an index of its unfinished runs, for workers to poll.

    The index holds every run whose status is not finished (queued, running,
    interrupted, paused, blocked). A store adds a run to it before the run's
    manifest exists and removes it after the manifest says the run finished,
    so a crash in between leaves an extra entry, never a missing one: readers
    treat it as a hint and read the manifest before they act. A run written
    by an actorflow older than the index, or an entry a power loss took, is
    put back by :meth:`reindex`.

    .. versionadded:: 0.4
    """

    async def list_unfinished(self, *, unowned: bool = False) -> list[str]:
        """The ids in the index, in no particular order, without reading any manifest.

        With ``unowned``, leave out the runs the store can cheaply tell a live
        owner holds (a live flock, a live worker lease naming the run). The
        filter only ever errs by keeping an owned run, for a claim to refuse.
        """
        ...

    async def unindex(self, run_id: str) -> None:
        """Drop ``run_id`` from the index: its manifest says it finished, or it is gone."""
        ...

    async def reindex(self) -> int:
        """Rebuild the index from every manifest (a full listing); how many entries changed."""
        ...


@runtime_checkable
class RunVersions(Protocol):
    """A store that tells which runs' manifests changed, without reading them.

    A reader that keeps the manifests it read (the inspector's runs page)
    refreshes them by reading again only those whose version changed, not
    every run. The memory store's version is a hash of the stored manifest,
    the file store's the run folder's change time, S3's the manifest's ETag;
    a database store's can be a row version.

    .. versionadded:: 0.6
    """

    async def list_run_versions(self) -> dict[str, str]:
        """Every run's id with its manifest's version, reading no manifest.

        A version changes whenever the manifest does; an equal one means
        the manifest the reader read with it is still current. An empty
        version says the store cannot vouch for it yet (it changed a moment
        ago): read the manifest again. Names that are no run id are left out
        (``list_unreadable`` names them); a run whose manifest cannot be read
        may be listed, its read then failing.
        """
        ...


class ClaimInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Who holds a run, as its store records the claim.

    Attributes:
        owner: the owner that claimed the run last (a ``Runtime`` claims as
            ``host:pid:tag``), whether or not it still lives; ``None`` if the
            run was never claimed, or its record is encrypted with a key the
            store was not given.
        alive: whether a live owner holds the run now; ``None`` if the store
            cannot tell (an S3 lease encrypted with a key it was not given).
        expires: a timed lease's deadline (S3), renewed by a live owner; a
            past one means the owner is gone. ``None`` where the operating
            system ends a claim with its process (file store) or with the
            store (memory).

    .. versionadded:: 0.2
    """

    owner: str | None = None
    alive: bool | None = None
    expires: float | None = None


@runtime_checkable
class ClaimInspector(Protocol):
    """A store that can say who holds a run without taking or disturbing its claim.

    .. versionadded:: 0.2
    """

    async def read_claim(self, run_id: str) -> ClaimInfo:
        """The run's claim: its last owner, and whether that owner is alive.

        Raises:
            RunNotFoundError: no such run.
        """
        ...


class SealCheck(msgspec.Struct, kw_only=True):
    """What :meth:`SealChecker.check_sealed` verified of one run.

    Attributes:
        records: log records checked.
        snapshots: snapshots checked.
        blobs: state blobs checked.
        other: manifests and claim records checked.
        encrypted: how many of them are encrypted (their contents were not opened).
        problems: ``(location, what is wrong)`` for each that fails its checksum.

    .. versionadded:: 0.2
    """

    records: int = 0
    snapshots: int = 0
    blobs: int = 0
    other: int = 0
    encrypted: int = 0
    problems: list[tuple[str, str]] = []

    def verify(
        self,
        codec: Codec,
        data: bytes,
        *,
        kind: Kind,
        part: Literal["records", "snapshots", "blobs", "other"],
        location: str,
    ) -> None:
        """Check one stored object's envelope (checksum, lengths, kind) and count it in ``part``."""
        setattr(self, part, getattr(self, part) + 1)
        try:
            header, _ = codec.verify(data, location=location)
        except CorruptedDataError as exc:
            self.problems.append((location, exc.cause_text))
            return
        if header.kind is not kind:
            self.problems.append((location, f"holds a {header.kind.name}, not a {kind.name}"))
        if header.encrypted:
            self.encrypted += 1


@runtime_checkable
class SealChecker(Protocol):
    """A store that can verify its stored bytes without the encryption key.

    Every stored object carries a checksum over its (possibly encrypted)
    body, so its integrity can be checked without opening it.

    .. versionadded:: 0.2
    """

    async def check_sealed(self, run_id: str) -> SealCheck:
        """Verify the checksum of every object of the run, decrypting nothing.

        A torn log tail (the last write of a killed process) is not a problem.
        """
        ...


@runtime_checkable
class SharedLimits(Protocol):
    """A store that keeps rate budgets every process using it shares (``Limit``).

    A budget is a sliding window of sixty seconds per key: the start times of
    requests and the tokens they spent, and a key's concurrency slots. The
    file store keeps them under one lock, so processes on one machine sharing
    it never exceed them together; the S3 store gives each process its share
    (the budget divided by the live workers); the memory store shares them
    between the runtimes using it. Times are the callers' clocks (seconds
    since the epoch).

    .. versionadded:: 0.5
    """

    async def take_limit(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """Take one request from ``key``'s budget at ``now``: 0.0, or the seconds to wait.

        Nothing is taken when it returns more than zero; ask again then.
        """
        ...

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """Count ``tokens`` spent at ``now`` against ``key``'s token budget."""
        ...

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """Hold one of ``key``'s ``slots`` without waiting: a handle, or None if all are held."""
        ...

    def release_limit_slot(self, handle: object) -> None:
        """Give back a slot from :meth:`take_limit_slot` (synchronous: it never waits)."""


class QueueSlot(msgspec.Struct, frozen=True, kw_only=True):
    """One of a queue's slots, held by one worker while it drives a run of the queue.

    Attributes:
        queue: the slot's queue (or a queue's rate key).
        index: which of the queue's slots.
        holder: who holds it (a runtime's owner name).

    .. versionadded:: 0.6
    """

    queue: str
    index: int
    holder: str


@runtime_checkable
class QueueSlots(Protocol):
    """A store whose workers share each queue's slots: what caps a queue across processes.

    A slot is held like a claim: the file store's is a ``flock`` the operating
    system ends with its process, the memory store's lives with the store.

    .. versionadded:: 0.6
    """

    async def take_queue_slot(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """Take a free one of the queue's ``slots`` slots at once; ``None`` if all are held."""
        ...

    async def release_queue_slot(self, slot: QueueSlot) -> None:
        """Give the slot up. Idempotent."""
        ...


@runtime_checkable
class TimedQueueSlots(Protocol):
    """A store whose queue slots can outlast their holder: a queue's ``per_minute`` slots.

    A ``per_minute`` slot must count for the minute after its run started
    even if the worker that holds it dies or stops first: it is taken with
    the time it ends, ``until``, which the store keeps with it, and a slot
    whose holder is gone, or that was released (``release_queue_slot``),
    stays held while ``until`` is after the taker's ``now``. Both times are
    the callers' clock (``Runtime(clock=...)``). A store that is no
    ``TimedQueueSlots`` frees such a slot with its holder.

    .. versionadded:: 0.6
    """

    async def take_timed_queue_slot(
        self, queue: str, slots: int, holder: str, *, now: float, until: float
    ) -> QueueSlot | None:
        """Take a free one of the queue's ``slots`` slots, to hold until released and
        at least until ``until``; ``None`` if all are held.

        A slot released, or whose holder died, is free once its own
        ``until`` is not after ``now``.
        """
        ...


@runtime_checkable
class FencedQueueSlots(Protocol):
    """A store whose queue slots can be taken from a holder that stalled (S3's leases):
    the run driven under such a slot is fenced with it.

    A slot that names a worker lease is taken over once that lease runs out,
    also from a worker that is only stalled (a pause, a partition). Bound to
    the run it gates, the slot fences that run too: when the worker finds its
    lease had run out and the slot is no longer its, the run's claim is lost,
    and the run's next write fails (``LeaseLostError``), so its attempt stops
    instead of running beside the run the slot's new holder started; a run
    not claimed yet is not claimed (``RunLockedError``).

    .. versionadded:: 0.6
    """

    async def bind_queue_slot(self, slot: QueueSlot, run_id: str) -> None:
        """Note that ``run_id`` is driven under ``slot`` (until the slot is released)."""
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    """A store that keeps schedules, for workers to start their ticks' runs.

    Definitions and progress are separate objects, each replaced whole (see
    the module's docstring): no write needs a compare-and-swap.

    .. versionadded:: 0.6
    """

    async def put_schedule(self, schedule: Schedule) -> None:
        """Store ``schedule``, replacing the one of the same id."""
        ...

    async def read_schedule(self, schedule_id: str) -> Schedule:
        """The schedule ``schedule_id``.

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        ...

    async def list_schedules(self) -> list[Schedule]:
        """Every schedule, by id (one that cannot be read is skipped)."""
        ...

    async def delete_schedule(self, schedule_id: str) -> None:
        """Remove the schedule and its progress (its runs stay).

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        ...

    async def put_schedule_progress(self, progress: ScheduleProgress) -> None:
        """Store a schedule's progress, replacing what was there."""
        ...

    async def read_schedule_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """A schedule's progress; ``None`` if no tick was started (or it cannot be read)."""
        ...


@runtime_checkable
class WorkWatch(Protocol):
    """A store that tells idle workers, in any process, that a run may be there to take.

    Workers still look at every ``poll_interval`` (a killed worker's runs come
    free without a word); a watch lets them look at once when a run is
    submitted (created ``queued``) or given up (stored ``interrupted`` or
    ``queued`` again by a runtime that stops).

    .. versionadded:: 0.6
    """

    def watch_work(self) -> contextlib.AbstractAsyncContextManager[InboxWatch]:
        """A watch whose ``changed()`` returns when such a run may be there (spuriously too).

        Raises:
            StoreUnavailableError: the store cannot listen (on entering).
        """
        ...
