"""Queues of submitted runs: declared caps, priority, deduplication, and a worker's dispatch.

A :class:`Queue` is declared on the runtime (``Runtime(queues=[...])``) and
named by ``Runtime.submit(..., queue=...)``; the run's manifest records the
queue, its priority and its dedup key. A worker hands the queued runs it
finds to a :class:`QueueDispatcher`, one loop per declared queue, which
starts the highest priority first (oldest first within a priority) once it
holds one of the queue's slots.

The cap across processes is the store's :class:`~actorflow.storage.QueueSlots`
(a ``flock`` per slot on the file store, an object naming the worker lease
on S3, the store itself in memory): a worker drives a run of the queue only
while it holds a slot. A store without them caps each worker on its own.
``per_minute`` is a second set of slots, each held for a minute from a
start, so no more than that many runs of the queue start in any minute; on
a store with :class:`~actorflow.storage.TimedQueueSlots` (file, S3) a slot
keeps counting until its minute ends even when its worker dies or stops
first.

Deduplication needs no capability: the run id of a submit with a dedup key
derives from the queue, the key and a generation, and a run is created with
``create_run``, which only one creator wins. Generation ``n + 1`` is created
only once run ``n`` has finished, so the newest generation is found by a
short search over run ids, and an unfinished one is returned as is.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow.errors import (
    ConfigurationError,
    DedupKeyError,
    QueueNotDeclaredError,
    RunNotFoundError,
)
from actorflow.storage import FencedQueueSlots, QueueSlot, QueueSlots, TimedQueueSlots

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from anyio.abc import TaskGroup

    from actorflow.storage import RunManifest, Store

__all__ = [
    "RATE_WINDOW",
    "Queue",
    "QueueDispatcher",
    "QueueTable",
    "check_dedup_key",
    "dedup_run_id",
    "run_fields",
    "submit_deduplicated",
]

RATE_WINDOW = 60.0
"""Seconds a start holds one of a queue's ``per_minute`` slots."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Queue(msgspec.Struct, frozen=True):
    """A queue of submitted runs, declared with ``Runtime(queues=[...])``.

    Attributes:
        name: what ``submit(..., queue=name)`` names (letters, digits,
            ``-`` and ``_``).
        max_concurrent: runs of the queue driven at once, across every
            worker of the store (each worker on its own on a store without
            queue slots); ``None``: no cap.
        per_minute: runs of the queue started in any minute, counted like
            ``max_concurrent``; ``None``: no rate.

    Raises:
        ConfigurationError: a bad name, or a cap or rate that is not a
            positive int.

    .. versionadded:: 0.6
    """

    name: str
    max_concurrent: int | None = None
    per_minute: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigurationError("Queue.name", self.name, "1-64 letters, digits, '-' or '_'")
        for option in ("max_concurrent", "per_minute"):
            value = getattr(self, option)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise ConfigurationError(f"Queue.{option}", value, "an int of 1 or more, or None")


class QueueTable:
    """A runtime's declared queues, by name.

    Raises:
        ConfigurationError: an entry is not a ``Queue``, or two share a name.
    """

    def __init__(self, queues: Iterable[Queue] = ()) -> None:
        self.by_name: dict[str, Queue] = {}
        for queue in queues:
            if not isinstance(queue, Queue):
                raise ConfigurationError("queues", queue, "Queue(...) objects")
            if queue.name in self.by_name:
                raise ConfigurationError("queues", queue.name, "each queue name declared once")
            self.by_name[queue.name] = queue

    def require(self, name: object) -> Queue:
        """The queue declared as ``name``.

        Raises:
            QueueNotDeclaredError: no such queue is declared.
        """
        queue = self.by_name.get(name) if isinstance(name, str) else None
        if queue is None:
            raise QueueNotDeclaredError(str(name), tuple(self.by_name))
        return queue


def check_dedup_key(key: object, run_id: str | None) -> str:
    """``key`` if it can deduplicate a submit.

    Raises:
        DedupKeyError: not a non-empty string, or given with a ``run_id``.
    """
    if not isinstance(key, str) or not key:
        raise DedupKeyError(key, "expected a non-empty string")
    if run_id is not None:
        raise DedupKeyError(key, "the run id derives from the key; pass run_id or dedup_key")
    return key


def dedup_run_id(queue: str | None, key: str, generation: int) -> str:
    """The run id of generation ``generation`` of ``key`` in ``queue``."""
    digest = hashlib.sha256(f"{queue or ''}\0{key}".encode()).hexdigest()[:32]
    return f"dedup-{digest}-{generation}"


async def _exists(store: Store, run_id: str) -> bool:
    try:
        await store.read_run(run_id)
    except RunNotFoundError:
        return False
    return True


async def _newest_generation(store: Store, queue: str | None, key: str) -> int:
    """The newest generation stored for ``key`` (``-1``: none), in a logarithmic number of reads."""
    if not await _exists(store, dedup_run_id(queue, key, 0)):
        return -1
    low, high = 0, 1
    while await _exists(store, dedup_run_id(queue, key, high)):
        low, high = high, high * 2
    while high - low > 1:  # low exists, high does not
        middle = (low + high) // 2
        if await _exists(store, dedup_run_id(queue, key, middle)):
            low = middle
        else:
            high = middle
    return low


async def submit_deduplicated(
    store: Store, manifest: RunManifest, queue: str | None, key: str
) -> tuple[RunManifest, bool]:
    """Create ``manifest`` under the key's next run id, or find its unfinished run.

    Returns ``(stored, created)`` like ``create_run``: ``created`` ``False``
    when a run of the key is still unfinished (that run comes back).
    """
    generation = max(0, await _newest_generation(store, queue, key))
    while True:
        run_id = dedup_run_id(queue, key, generation)
        stored, created = await store.create_run(msgspec.structs.replace(manifest, run_id=run_id))
        if created or not (stored.status.finished or stored.tombstone):
            return stored, created
        generation += 1


def _order(manifest: RunManifest) -> tuple[int, float, str]:
    return (-manifest.priority, manifest.created, manifest.run_id)


class _Lane:
    """One queue's runs waiting in this worker, and its local cap and rate."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.pending: dict[str, RunManifest] = {}
        self.local = anyio.CapacityLimiter(queue.max_concurrent or math.inf)
        self.rate = anyio.CapacityLimiter(queue.per_minute or math.inf)
        self.wake = anyio.Event()

    def nudge(self) -> None:
        self.wake.set()

    async def wait(self, seconds: float) -> None:
        """Until nudged, or ``seconds`` passed; several tasks may wait at once."""
        event = self.wake
        with anyio.move_on_after(seconds):
            await event.wait()
        if self.wake is event and event.is_set():
            self.wake = anyio.Event()


class QueueDispatcher:
    """A worker's loops, one per declared queue, that start queued runs in order within the caps.

    Args:
        store: the store (its queue slots, if it has them, cap across workers).
        queues: the runtime's declared queues.
        owner: who holds the slots taken.
        worker_slots: the worker's own cap (``AdoptionPolicy.max_concurrent``).
        adopt: drives one run to its end (the adopter's adoption).
        poll_interval: seconds between tries for a slot other workers hold.
        clock: what a ``per_minute`` window is measured by (``time.time()``
            if ``None``).
    """

    def __init__(
        self,
        store: Store,
        queues: QueueTable,
        *,
        owner: str,
        worker_slots: anyio.CapacityLimiter,
        adopt: Callable[[RunManifest], Awaitable[None]],
        poll_interval: float,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._store = store
        self._now = clock or time.time
        self._slots: QueueSlots | None = store if isinstance(store, QueueSlots) else None
        self._timed: TimedQueueSlots | None = store if isinstance(store, TimedQueueSlots) else None
        self._owner = owner
        self._worker_slots = worker_slots
        self._adopt = adopt
        self._poll = poll_interval
        self._lanes = {name: _Lane(queue) for name, queue in queues.by_name.items()}
        self._busy: set[str] = set()
        self._reading = 0
        self._read = anyio.Event()
        self._read.set()

    def reading(self, delta: int) -> None:
        """The worker began (``+1``) or ended (``-1``) reading a run it found.

        A queue's next run is chosen only when no read is under way, so a
        look that found many runs offers them all before the best is picked.
        """
        self._reading += delta
        if self._reading == 0:
            self._read.set()
        elif self._read.is_set():
            self._read = anyio.Event()

    def knows(self, queue: str) -> bool:
        """Whether ``queue`` is declared here (a worker leaves other queues' runs alone)."""
        return queue in self._lanes

    def holds(self, run_id: str) -> bool:
        """Whether the run waits here or is being started from here."""
        return run_id in self._busy

    def offer(self, manifest: RunManifest) -> None:
        """A run of a declared queue to start when its turn and a slot come."""
        assert manifest.queue is not None
        lane = self._lanes[manifest.queue]
        lane.pending[manifest.run_id] = manifest
        self._busy.add(manifest.run_id)
        lane.nudge()

    def retain(self, unowned: set[str]) -> None:
        """Drop waiting runs the index no longer lists as unowned (another worker took them)."""
        for lane in self._lanes.values():
            for run_id in [r for r in lane.pending if r not in unowned]:
                del lane.pending[run_id]
                self._busy.discard(run_id)

    def nudge(self) -> None:
        """Try for slots again now (a slot may have come free elsewhere)."""
        for lane in self._lanes.values():
            lane.nudge()

    def depth(self, queue: str) -> int:
        """Runs of ``queue`` waiting in this worker."""
        return len(self._lanes[queue].pending)

    async def run(self, tg: TaskGroup) -> None:
        """Serve every declared queue until cancelled."""
        async with anyio.create_task_group() as loops:
            for lane in self._lanes.values():
                loops.start_soon(self._serve, lane, tg)

    async def _slot(
        self, lane: _Lane, key: str, slots: int | None, taken: _Taken | None = None
    ) -> QueueSlot | None:
        """One of the store's ``slots`` slots of ``key``, waiting for one; ``None`` if uncapped.

        With ``taken``, a rate slot: timed to end a minute from now, which
        ``taken.start`` keeps, when the store can keep it past its holder.
        """
        if slots is None or self._slots is None:
            return None
        while True:
            if taken is not None and self._timed is not None:
                now = self._now()
                slot = await self._timed.take_timed_queue_slot(
                    key, slots, self._owner, now=now, until=now + RATE_WINDOW
                )
                taken.start = now if slot is not None else None
            else:
                slot = await self._slots.take_queue_slot(key, slots, self._owner)
            if slot is not None:
                return slot
            await lane.wait(self._poll)

    async def _serve(self, lane: _Lane, tg: TaskGroup) -> None:
        queue = lane.queue
        while True:
            if not lane.pending:
                await lane.wait(math.inf)
                continue
            await self._read.wait()
            taken = _Taken()
            try:
                for limiter in (lane.local, self._worker_slots):
                    await limiter.acquire_on_behalf_of(taken.token)
                    taken.limiters.append(limiter)
                if queue.per_minute is not None:
                    await lane.rate.acquire_on_behalf_of(taken.token)
                    taken.rate_limiter = lane.rate
                slot = await self._slot(lane, queue.name, queue.max_concurrent)
                taken.slots += [slot] if slot is not None else []
                slot = await self._slot(lane, f"{queue.name}@rate", queue.per_minute, taken)
                taken.rate += [slot] if slot is not None else []
            except BaseException:
                await self._let_go(lane, taken)
                await self._end_window(lane, taken)
                raise
            if not lane.pending:  # every waiting run left meanwhile
                await self._let_go(lane, taken)
                await self._end_window(lane, taken)
                continue
            # the best run is chosen once the slots are held: what waits now, not before
            manifest = min(lane.pending.values(), key=_order)
            del lane.pending[manifest.run_id]
            tg.start_soon(self._start, lane, taken, manifest)

    async def _start(self, lane: _Lane, taken: _Taken, manifest: RunManifest) -> None:
        # the minute the store keeps for a timed rate slot is the one held here
        started = taken.start if taken.start is not None else self._now()
        try:
            if isinstance(self._store, FencedQueueSlots):
                for slot in taken.slots:  # a slot taken from this worker stops the run too
                    await self._store.bind_queue_slot(slot, manifest.run_id)
            await self._adopt(manifest)
        finally:
            self._busy.discard(manifest.run_id)
            await self._let_go(lane, taken)
            # a start holds its share of the rate for the window, even once the run ended
            await self._hold_window(lane, taken, started + RATE_WINDOW)

    async def _hold_window(self, lane: _Lane, taken: _Taken, until: float) -> None:
        if taken.rate_limiter is None and not taken.rate:
            return
        try:
            # the clock may be a test's: read it again at each poll or nudge
            while (left := until - self._now()) > 0:
                await lane.wait(min(left, self._poll))
        finally:
            # stopped within the minute, a timed slot released still counts to its end
            await self._end_window(lane, taken)

    async def _release(self, slots: list[QueueSlot]) -> None:
        if self._slots is not None and slots:
            with anyio.CancelScope(shield=True):
                for slot in slots:
                    await self._slots.release_queue_slot(slot)

    async def _let_go(self, lane: _Lane, taken: _Taken) -> None:
        """Give up what a start holds while its run runs: the cap's slot and local shares."""
        await self._release(taken.slots)
        taken.slots = []
        for limiter in taken.limiters:
            limiter.release_on_behalf_of(taken.token)
        taken.limiters = []
        lane.nudge()

    async def _end_window(self, lane: _Lane, taken: _Taken) -> None:
        """Give up a start's share of the queue's rate."""
        await self._release(taken.rate)
        taken.rate = []
        if taken.rate_limiter is not None:
            taken.rate_limiter.release_on_behalf_of(taken.token)
            taken.rate_limiter = None
        lane.nudge()


class _Taken:
    """What one start of a queued run holds: shares of local caps, and the store's slots."""

    def __init__(self) -> None:
        self.token = object()
        self.limiters: list[anyio.CapacityLimiter] = []
        self.rate_limiter: anyio.CapacityLimiter | None = None
        self.slots: list[QueueSlot] = []
        self.rate: list[QueueSlot] = []
        self.start: float | None = None  # when a timed rate slot's minute began


def run_fields(queue: str | None, priority: Any, dedup_key: str | None) -> dict[str, Any]:
    """The manifest fields a queued submit records.

    Raises:
        ConfigurationError: ``priority`` is not an int.
    """
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ConfigurationError("priority", priority, "an int (higher runs first)")
    return {"queue": queue, "priority": priority, "dedup_key": dedup_key}
