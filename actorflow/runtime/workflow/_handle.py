"""``RunHandle``: a started run's status, events, result and cancel."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, overload

import anyio

from actorflow._log import enabled, get_logger
from actorflow._text import error_message
from actorflow.runtime.workflow._stream import EventHub, RunEvent
from actorflow.storage import RunStatus

if sys.version_info >= (3, 13):
    from typing import TypeVar
else:
    from typing_extensions import TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime.workflow._stream import Emitted, EventStream
    from actorflow.storage import RetentionPolicy

__all__ = ["RunEvent", "RunHandle", "RunTracker", "fail_run"]

R = TypeVar("R", default=Any)
"""What a run's workflow returns (``Any`` where the workflow class is not known)."""

_log = get_logger("actorflow.run")


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
        self.failure: Exception | None = None
        """Set by :meth:`fail`: the run ends failed with it, not cancelled."""
        self.interrupt_requested = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.ended = anyio.Event()
        self.heartbeat: anyio.CancelScope | None = None
        """Where the run's lease is renewed (stores whose leases time out); stopped before
        the lease is released, so that no renewal ever races the release."""
        self.adopted_by: str | None = None
        """The worker that adopted the run (``adopt_orphans``): its attempt records so."""
        self.checkpoints_written: Callable[[], Awaitable[None]] | None = None
        """Waits for the snapshots still queued when the run ended (retention waits on it)."""
        self.keeps_every_checkpoint: Callable[[RetentionPolicy], bool] | None = None
        """Once they are written: whether a retention policy keeps every snapshot the run
        has (a prune would only read them)."""
        self._cancel_scope: anyio.CancelScope | None = None
        self._drive_scope: anyio.CancelScope | None = None
        self._shielded: anyio.CancelScope | None = None
        self._grace = 0.0
        self.stream = EventHub(run_id)
        """Where the run's lifecycle events and its agents' ``emit`` go, to ``events()`` readers."""
        self.handle: RunHandle[Any] = RunHandle._create(self)

    @property
    def done(self) -> bool:
        """Whether the run ended."""
        return self.ended.is_set()

    def emit(self, event: str, level: str = "info", **data: Any) -> None:
        """Log ``event`` with structlog and pass it to every ``events()`` subscriber."""
        if enabled(level):
            getattr(_log, level)(event, run_id=self.run_id, **data)
        self.stream.lifecycle(RunEvent(event=event, run_id=self.run_id, time=time.time(), **data))

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

    def fail(self, error: Exception) -> None:
        """Stop the run as :meth:`cancel` does, but mark it failed with ``error`` (a timeout)."""
        if not self.cancel_requested:
            self.failure = error
        self.cancel(error_message(error))

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
        stream = self.stream
        if stream.dropped:
            self.metrics["events_dropped"] = stream.dropped
        outbox = stream.outbox
        if outbox is not None and (outbox.dropped or outbox.unencodable or outbox.failed):
            # left out of the store's event stream (readers in other processes)
            self.metrics["emits_not_streamed"] = outbox.dropped + outbox.unencodable + outbox.failed
        stream.close()


class _NoPublicConstructor(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{cls.__qualname__} has no public constructor; get one from `runtime.start(...)`"
        )

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


class RunHandle(Generic[R], metaclass=_NoPublicConstructor):
    """A run started with ``runtime.start``. Users receive it; they never build it.

    ``RunHandle[R]``: ``result()`` returns the ``R`` its workflow's ``run`` returns.

    Attributes:
        run_id: the run's id.
        workflow: the orchestrator class's stable name.

    .. versionchanged:: 0.4
       Generic in the workflow's result type.
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

    @overload
    def events(
        self,
        *,
        replay: bool = True,
        lifecycle: Literal[True] = True,
        emits: Literal[False],
        buffer: int | None = None,
    ) -> EventStream[RunEvent]: ...
    @overload
    def events(
        self,
        *,
        replay: bool = True,
        lifecycle: Literal[False],
        emits: Literal[True] = True,
        buffer: int | None = None,
    ) -> EventStream[Emitted]: ...
    @overload
    def events(
        self,
        *,
        replay: bool = True,
        lifecycle: bool = True,
        emits: bool = True,
        buffer: int | None = None,
    ) -> EventStream[RunEvent | Emitted]: ...
    def events(
        self,
        *,
        replay: bool = True,
        lifecycle: bool = True,
        emits: bool = True,
        buffer: int | None = None,
    ) -> EventStream[Any]:
        """The run's events as they happen, ending when the run ends.

        Yields lifecycle events (``RunEvent``) and what its agents emit
        (``Emitted``), in the order they happened; ``lifecycle=False`` or
        ``emits=False`` leaves one kind out. The reader is subscribed when
        this returns (call it right after ``runtime.start``: the run's code
        starts only once the caller yields); with ``replay`` the recent past
        lifecycle events (up to 256) come first; emits are never kept for
        later readers (with no reader, ``emit`` keeps nothing). Never blocks
        the run: a reader more than ``buffer`` emitted events behind (default
        10,000) loses the oldest, counted in the stream's ``dropped``;
        lifecycle events are never lost.

        To stop reading before the run ends, close it (``async with
        handle.events() as events:``, ``contextlib.aclosing``, or ``close()``).

        .. versionchanged:: 0.2
           Yields emitted events too; returns an ``EventStream`` (with
           ``dropped``), subscribed at the call; ``lifecycle``, ``emits`` and
           ``buffer``.
        """
        return self._tracker.stream.subscribe(
            replay=replay, lifecycle=lifecycle, emits=emits, buffer=buffer
        )

    @property
    def done(self) -> bool:
        """Whether the run ended (finished, failed, paused, cancelled or crashed here)."""
        return self._tracker.done

    async def wait(self) -> None:
        """Wait until the run ends, without raising its error."""
        await self._tracker.ended.wait()

    async def result(self) -> R:
        """Wait for the run and return its result.

        Raises:
            RunPaused: the run waits for input.
            RunBlockedError: its code no longer replays its log; the run waits
                for code that does (the ``NonDeterminismError`` is chained).
            RunFailedError: the run failed (the cause is chained).
            RecoveryFailedError: what the run recorded cannot be read (the
                cause is chained); it stays as it was.
            RunEndNotStoredError: the run finished (``status`` says how: its end
                is durable in its log) but its manifest could not be updated;
                ``recover`` repairs it.
            StorageError: the run's log could not be written.
        """
        tracker = self._tracker
        await tracker.ended.wait()
        if tracker.error is not None:
            raise tracker.error
        result: R = tracker.result
        return result

    async def checkpointed(self) -> None:
        """Wait until the run has ended and every checkpoint it asked for is written.

        A run returns once its outcome is stored; the checkpoints of its phase
        ends still queued then are written after it (they never hold the
        caller up). Await this before listing them, forking from the last
        one or handing the store to another process.

        .. versionadded:: 0.5
        """
        tracker = self._tracker
        await tracker.ended.wait()
        if tracker.checkpoints_written is not None:
            await tracker.checkpoints_written()

    def cancel(self, reason: str | None = None) -> None:
        """Stop the run; it is marked cancelled (``reason`` is recorded) and not recovered."""
        self._tracker.cancel(reason)

    def __repr__(self) -> str:
        return f"<RunHandle {self.workflow} {self.run_id!r} {self.status}>"


def fail_run(handle: RunHandle[Any], error: Exception) -> None:
    """Stop ``handle``'s run and mark it failed with ``error`` (the engine's, not users')."""
    handle._tracker.fail(error)  # same module: the handle's own tracker
