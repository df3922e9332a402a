"""``RunHandle``: a started run's status, events, result and cancel."""

from __future__ import annotations

import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from actorflow._log import enabled, get_logger
from actorflow.storage import RunStatus

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["RunEvent", "RunHandle", "RunTracker"]

_log = get_logger("actorflow.run")


class RunEvent(dict[str, Any]):
    """One lifecycle event of a run: ``event`` (its name), ``run_id``, ``time`` and data."""

    @property
    def name(self) -> str:
        """The event's name, e.g. ``checkpoint_saved``."""
        return str(self["event"])


class RunTracker:
    """The engine's side of a started run: where its events, metrics and outcome go.

    One per attempt's run; its ``handle`` is what users receive.
    """

    def __init__(self, run_id: str, workflow: str) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.status = RunStatus.RUNNING
        self.started = time.time()
        self.metrics: dict[str, float] = {}
        self.replayed_steps = 0
        self.cancel_requested = False
        self.cancel_reason: str | None = None
        self.interrupt_requested = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.ended = anyio.Event()
        self.checkpoints_written: Callable[[], Awaitable[None]] | None = None
        """Waits for the snapshots still queued when the run ended (retention waits on it)."""
        self._cancel_scope: anyio.CancelScope | None = None
        self._drive_scope: anyio.CancelScope | None = None
        self._shielded: anyio.CancelScope | None = None
        self._grace = 0.0
        self._subscribers: list[MemoryObjectSendStream[RunEvent]] = []
        # late subscribers see the recent past (events(replay=True))
        self._history: deque[RunEvent] = deque(maxlen=256)
        self.handle: RunHandle = RunHandle._create(self)

    @property
    def done(self) -> bool:
        """Whether the run ended."""
        return self.ended.is_set()

    def emit(self, event: str, level: str = "info", **data: Any) -> None:
        """Log ``event`` with structlog and pass it to every ``events()`` subscriber."""
        if enabled(level):
            getattr(_log, level)(event, run_id=self.run_id, **data)
        record = RunEvent(event=event, run_id=self.run_id, time=time.time(), **data)
        self._history.append(record)
        for stream in list(self._subscribers):
            try:
                stream.send_nowait(record)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                # its reader left (a loop over events() that broke out): let go of it, closed
                self._subscribers.remove(stream)
                stream.close()

    def subscribe(self, *, replay: bool) -> MemoryObjectReceiveStream[RunEvent]:
        """A stream of the run's events from now on (after the recent past, with ``replay``)."""
        send, receive = anyio.create_memory_object_stream[RunEvent](math.inf)
        if replay:
            for past in self._history:
                send.send_nowait(past)
        if self.ended.is_set():
            send.close()
        else:
            self._subscribers.append(send)
        return receive

    def attach(self, scope: anyio.CancelScope | None) -> None:
        """The cancel scope the run's code runs in (None once it has left it)."""
        self._cancel_scope = scope

    def cancel(self, reason: str | None = None) -> None:
        """Stop the run; it is marked cancelled (with ``reason``) and will not be recovered."""
        if not self.cancel_requested:
            self.cancel_reason = reason
        self.cancel_requested = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    def attach_driver(self, scope: anyio.CancelScope | None) -> None:
        """The cancel scope the whole attempt runs in (what ``interrupt`` cancels)."""
        self._drive_scope = scope
        if scope is not None and self.interrupt_requested:
            scope.cancel()

    def shield(self, scope: anyio.CancelScope | None) -> None:
        """A shielded scope the attempt is in (storing its outcome), or None once left.

        An interrupt gives it ``grace`` seconds, then cancels it: shielded
        work that waits for others (the checkpoint actor) must not hold up
        the runtime's shutdown.
        """
        self._shielded = scope
        if scope is not None and self.interrupt_requested:
            scope.deadline = min(scope.deadline, anyio.current_time() + self._grace)

    def interrupt(self, grace: float) -> None:
        """Stop the run because its runtime stops: it is marked interrupted, for ``recover()``.

        Shielded work in progress (storing an outcome) gets ``grace`` seconds.
        """
        self.interrupt_requested = True
        self._grace = grace
        if self._drive_scope is not None:
            self._drive_scope.cancel()
        if self._shielded is not None:
            self.shield(self._shielded)

    def finish(
        self, status: RunStatus, result: Any = None, error: BaseException | None = None
    ) -> None:
        """The run ended with ``status``: wake every waiter and close every event stream."""
        self.status = status
        self.result = result
        self.error = error
        self.ended.set()
        for stream in self._subscribers:
            stream.close()
        self._subscribers.clear()


class _NoPublicConstructor(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{cls.__qualname__} has no public constructor; get one from `runtime.start(...)`"
        )

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


class RunHandle(metaclass=_NoPublicConstructor):
    """A run started with ``runtime.start``. Users receive it; they never build it.

    Attributes:
        run_id: the run's id.
        workflow: the orchestrator class's stable name.
    """

    __slots__ = ("_tracker", "run_id", "workflow")

    def __init__(self, tracker: RunTracker) -> None:
        self._tracker = tracker
        self.run_id = tracker.run_id
        self.workflow = tracker.workflow

    @property
    def status(self) -> RunStatus:
        """The run's status as this process knows it."""
        return self._tracker.status

    @property
    def started(self) -> float:
        """When this process started (or resumed) the run, in seconds since the epoch."""
        return self._tracker.started

    @property
    def metrics(self) -> dict[str, float]:
        """The run's metrics once it ended: steps, checkpoints, elapsed, what agents report."""
        return self._tracker.metrics

    @property
    def replayed_steps(self) -> int:
        """How many log records this attempt replayed instead of running."""
        return self._tracker.replayed_steps

    async def events(self, *, replay: bool = True) -> AsyncGenerator[RunEvent, None]:
        """Yield the run's events as they happen, ending when the run ends.

        With ``replay`` the events emitted before the call come first. To stop
        reading before the run ends, close it: ``async with
        contextlib.aclosing(handle.events()) as events:`` (trio warns of an
        async generator left suspended).

        .. versionchanged:: 0.2
           Typed as the async generator it is, so that ``aclosing`` takes it.
        """
        receive = self._tracker.subscribe(replay=replay)
        async with receive:
            async for event in receive:
                yield event

    @property
    def done(self) -> bool:
        """Whether the run ended (finished, failed, paused, cancelled or crashed here)."""
        return self._tracker.done

    async def wait(self) -> None:
        """Wait until the run ends, without raising its error."""
        await self._tracker.ended.wait()

    async def result(self) -> Any:
        """Wait for the run and return its result.

        Raises:
            RunPaused: the run waits for input.
            RunBlockedError: its code no longer replays its log; the run waits
                for code that does (the ``NonDeterminismError`` is chained).
            RunFailedError: the run failed (the cause is chained).
            RecoveryFailedError: what the run recorded cannot be read (the
                cause is chained); it stays as it was.
            StorageError: the run's log could not be written.
        """
        tracker = self._tracker
        await tracker.ended.wait()
        if tracker.error is not None:
            raise tracker.error
        return tracker.result

    def cancel(self, reason: str | None = None) -> None:
        """Stop the run; it is marked cancelled (``reason`` is recorded) and not recovered."""
        self._tracker.cancel(reason)

    def __repr__(self) -> str:
        return f"<RunHandle {self.workflow} {self.run_id!r} {self.status}>"
