"""A run's in-process event stream: lifecycle events and agents' ``emit``, to every reader.

One ``EventHub`` per started run (it lives on the run's ``RunTracker``).
Agents and the orchestrator publish to it with ``emit``; the engine
publishes lifecycle events (``RunEvent``) with ``lifecycle``. Each reader
(``handle.events()``) has its own ``EventStream``.

Why not a memory object stream per reader: ``emit`` must never block nor
raise into an agent, and must cost next to nothing. Each reader's buffer is a
deque: publishing appends to it and wakes the reader only when it sleeps
(one wakeup per batch, not per event); the reader drains the batch without
going back to the event loop.

Bounds: a reader keeps at most ``buffer`` emitted events. When it falls
behind, the OLDEST are dropped (the deque evicts them) and counted on the
stream (``EventStream.dropped``) and in a ``events_dropped`` log line when the
reader catches up. The oldest, because a live reader wants the present: after
a stall it resumes with the newest ``buffer`` events and the stream goes on
without a second gap; each agent's events stay in order (drops only remove),
and ``Emitted.seq`` numbers every emit of the run, so a gap shows exactly
which were lost. Lifecycle events are few and are never dropped.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio
import msgspec

from actorflow._log import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType
    from typing import Self

    from actorflow.runtime.workflow._export import Outbox

__all__ = [
    "DEFAULT_BUFFER",
    "EmitPayload",
    "EmitSink",
    "Emitted",
    "EventHub",
    "EventStream",
    "RawEmitPayload",
    "RunEvent",
]

_log = get_logger("actorflow.run")

E = TypeVar("E")

DEFAULT_BUFFER = 10_000
"""Emitted events a reader holds before it loses the oldest."""

_HISTORY = 256
"""Recent lifecycle events a new reader is given first (``replay=True``); emits are not kept."""

_EMPTY: Any = object()
_now = time.time


class RunEvent(dict[str, Any]):
    """One lifecycle event of a run: ``event`` (its name), ``run_id``, ``time`` and data."""

    @property
    def name(self) -> str:
        """The event's name, e.g. ``checkpoint_saved``."""
        return str(self["event"])


class Emitted(msgspec.Struct, frozen=True, kw_only=True):
    """An event an agent (or the orchestrator) emitted, as ``handle.events()`` yields it.

    Attributes:
        agent: the emitting agent's name (``"orchestrator"`` for the run's own code).
        event: the object given to ``emit``, as is (not copied nor encoded).
        seq: the run's emit counter in this process (0, 1, 2...): a gap is
            what this reader lost.
        time: when it was emitted, in seconds since the epoch.
        step_id: the step that recorded it, for ``await ctx.emit(..., durable=True)``;
            None for an ephemeral emit.

    .. versionadded:: 0.2
    """

    agent: str
    event: Any
    seq: int
    time: float
    step_id: str | None = None

    @property
    def name(self) -> str:
        """``"emitted"``: reads like a lifecycle event's ``name`` in code that dispatches on it."""
        return "emitted"

    @property
    def durable(self) -> bool:
        """Whether a step recorded it (``ctx.emit(..., durable=True)``)."""
        return self.step_id is not None


class EmitSink(Protocol):
    """Where emitted events go (``EventHub.publish``)."""

    def __call__(self, agent: str, event: object, step_id: str | None = None, /) -> None:
        """Pass ``event`` from ``agent`` on (``step_id``: the step that recorded it)."""


class _Reader:
    """One reader's buffers; the hub pushes, the reader's ``EventStream`` pops."""

    __slots__ = ("__weakref__", "closed", "dropped", "emits", "lifecycle", "reported", "wakeup")

    def __init__(self, buffer: int) -> None:
        self.emits: deque[Emitted] = deque(maxlen=buffer)
        # (how many emits came before it, the event): merged with emits by that count
        self.lifecycle: deque[tuple[int, RunEvent]] = deque()
        self.wakeup: anyio.Event | None = None
        self.dropped = 0
        self.reported = 0
        self.closed = False

    def push_emit(self, item: Emitted) -> None:
        emits = self.emits
        if len(emits) == emits.maxlen:
            self.dropped += 1  # the append evicts the oldest
        emits.append(item)
        wakeup = self.wakeup
        if wakeup is not None:
            self.wakeup = None
            wakeup.set()

    def push_lifecycle(self, key: int, event: RunEvent) -> None:
        self.lifecycle.append((key, event))
        self.wake()

    def wake(self) -> None:
        wakeup = self.wakeup
        if wakeup is not None:
            self.wakeup = None
            wakeup.set()

    def pop(self) -> Any:
        """The next event in publishing order, or ``_EMPTY``."""
        emits = self.emits
        lifecycle = self.lifecycle
        if lifecycle and (not emits or lifecycle[0][0] <= emits[0].seq):
            return lifecycle.popleft()[1]
        if emits:
            return emits.popleft()
        return _EMPTY


class EventHub:
    """A run's event fan-out: publishers never wait, each reader has a bounded buffer.

    Args:
        run_id: the run's id (for log lines).
        buffer: emitted events each reader holds before it loses the oldest.
    """

    __slots__ = (
        "_dropped_gone",
        "_emit_readers",
        "_lifecycle_history",
        "_lifecycle_readers",
        "_open_outbox",
        "_outbox",
        "_seq",
        "buffer",
        "closed",
        "run_id",
    )

    def __init__(self, run_id: str, buffer: int = DEFAULT_BUFFER) -> None:
        self.run_id = run_id
        self.buffer = buffer
        self.closed = False
        self._dropped_gone = 0  # what readers no longer subscribed lost
        self._seq = 0
        self._emit_readers: list[_Reader] = []
        self._lifecycle_readers: list[_Reader] = []
        self._lifecycle_history: deque[tuple[int, RunEvent]] = deque(maxlen=_HISTORY)
        self._outbox: Outbox | None = None
        self._open_outbox: Callable[[], Outbox] | None = None

    def export(self, open_outbox: Callable[[], Outbox]) -> None:
        """Send every ephemeral emit from now on to an outbox too (the store's event stream).

        ``open_outbox`` makes it at the first such emit: a run that emits
        nothing pays for no outbox (nor, on a file store, a segment).
        """
        self._open_outbox = open_outbox

    @property
    def outbox(self) -> Outbox | None:
        """Where ephemeral emits go for readers in other processes, if anywhere."""
        return self._outbox

    @property
    def dropped(self) -> int:
        """Emitted events lost by readers too far behind, in all (each reader counts its own)."""
        return self._dropped_gone + sum(r.dropped for r in self._emit_readers)

    @property
    def emitted(self) -> int:
        """How many events were emitted in this process so far."""
        return self._seq

    def publish(self, agent: str, event: object, step_id: str | None = None, /) -> None:
        """Pass ``event`` from ``agent`` to every reader of emits; never blocks nor raises.

        This is what ``Actor.emit`` calls; it must stay cheap with no reader.
        An ephemeral one (no ``step_id``) also goes to the run's outbox, for
        readers in other processes; a durable one is in the log already.
        """
        seq = self._seq
        self._seq = seq + 1
        if step_id is None and self._open_outbox is not None:
            outbox = self._outbox
            if outbox is None:
                outbox = self._outbox = self._open_outbox()
            outbox.put(agent, event)
        readers = self._emit_readers
        if readers:  # with none, nothing is built nor kept: emits are not replayed
            item = Emitted(agent=agent, event=event, seq=seq, time=_now(), step_id=step_id)
            for reader in readers:
                reader.push_emit(item)

    def lifecycle(self, event: RunEvent) -> None:
        """Pass a lifecycle event to every reader of them (never dropped)."""
        entry = (self._seq, event)
        self._lifecycle_history.append(entry)
        for reader in self._lifecycle_readers:
            reader.push_lifecycle(*entry)

    def subscribe(
        self, *, replay: bool, lifecycle: bool, emits: bool, buffer: int | None = None
    ) -> EventStream[Any]:
        """A new reader of what is published from now on (past lifecycle first, with ``replay``)."""
        reader = _Reader(self.buffer if buffer is None else buffer)
        if replay and lifecycle:
            reader.lifecycle.extend(self._lifecycle_history)
        if self.closed:
            reader.closed = True
        else:
            if lifecycle:
                self._lifecycle_readers.append(reader)
            if emits:
                self._emit_readers.append(reader)
        stream: EventStream[Any] = EventStream._create(self, reader)
        return stream

    def unsubscribe(self, reader: _Reader) -> None:
        """Forget ``reader`` (its stream was closed or collected)."""
        reader.closed = True
        if reader in self._emit_readers:
            self._emit_readers.remove(reader)
            self._dropped_gone += reader.dropped
        if reader in self._lifecycle_readers:
            self._lifecycle_readers.remove(reader)
        reader.wake()  # a task waiting on the stream sees its end

    def close(self) -> None:
        """The run ended: every reader gets what is buffered, then the end of its stream."""
        self.closed = True
        self._open_outbox = None
        if self._outbox is not None:
            self._outbox.close()
        self._dropped_gone = self.dropped
        readers = {id(r): r for r in (*self._emit_readers, *self._lifecycle_readers)}
        self._emit_readers.clear()
        self._lifecycle_readers.clear()
        for reader in readers.values():
            reader.closed = True
            reader.wake()

    def note_dropped(self, reader: _Reader) -> None:
        """A reader caught up after losing events: count them and say so, once per episode."""
        lost = reader.dropped - reader.reported
        reader.reported = reader.dropped
        _log.warning("events_dropped", run_id=self.run_id, dropped=lost, total=reader.dropped)


class _NoPublicConstructor(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{cls.__qualname__} has no public constructor; use `handle.events()`")

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


class EventStream(Generic[E], metaclass=_NoPublicConstructor):
    """One reader of a run's events (``handle.events()``): an async iterator.

    It ends when the run ends, after what it buffered. It is subscribed from
    the moment ``handle.events()`` returns. Reading never blocks the run: a
    reader that falls more than its buffer behind loses the oldest emitted
    events (``dropped`` counts them). Iterating does not pass through the
    event loop while events are buffered (a batch is drained at once); it
    waits, and can be cancelled, only when the buffer is empty.

    Close it (``aclose``, ``close``, ``async with``, or let it be collected)
    to stop reading before the run ends.

    .. versionadded:: 0.2
    """

    __slots__ = ("__weakref__", "_finalizer", "_hub", "_reader")

    def __init__(self, hub: EventHub, reader: _Reader) -> None:
        self._hub = hub
        self._reader = reader
        # a reader that breaks out of its loop and forgets the stream stops being fed
        self._finalizer = weakref.finalize(self, hub.unsubscribe, reader)

    @property
    def dropped(self) -> int:
        """How many emitted events this reader lost because it fell behind."""
        return self._reader.dropped

    @property
    def buffered(self) -> int:
        """Events waiting to be read."""
        return len(self._reader.emits) + len(self._reader.lifecycle)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> E:
        reader = self._reader
        while True:
            item = reader.pop()
            if item is not _EMPTY:
                return item  # type: ignore[no-any-return]
            if reader.dropped != reader.reported:
                self._hub.note_dropped(reader)
            if reader.closed:
                self.close()
                raise StopAsyncIteration
            wakeup = reader.wakeup = anyio.Event()
            await wakeup.wait()

    def close(self) -> None:
        """Stop reading: nothing more is buffered for this reader. Never blocks."""
        self._finalizer()
        self._reader.emits.clear()
        self._reader.lifecycle.clear()

    async def aclose(self) -> None:
        """``close``, for ``contextlib.aclosing`` and ``async with``."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class EmitPayload(msgspec.Struct, frozen=True, kw_only=True):
    """What the record of a durable emit holds (a ``StepRecord`` of kind ``emit``, its result).

    ``type`` is the event's class name (``__qualname__``, or ``__actorflow_name__``),
    so a reader that cannot import it still knows what it is.
    """

    type: str
    agent: str
    event: Any


class RawEmitPayload(msgspec.Struct, frozen=True, kw_only=True):
    """``EmitPayload`` as read back: the event stays MessagePack bytes until asked for."""

    type: str
    agent: str
    event: msgspec.Raw
