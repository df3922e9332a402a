"""``RunHandle``: a started run's status, events, result and cancel."""

from __future__ import annotations

import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio

from actorflow._log import enabled, get_logger
from actorflow.storage import RunStatus

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.streams.memory import MemoryObjectSendStream

__all__ = ["RunEvent", "RunHandle"]

_log = get_logger("actorflow.run")


class RunEvent(dict[str, Any]):
    """One lifecycle event of a run: ``event`` (its name), ``run_id``, ``time`` and data."""

    @property
    def name(self) -> str:
        """The event's name, e.g. ``checkpoint_saved``."""
        return str(self["event"])


class RunHandle:
    """A run started with ``runtime.start``. Users receive it; they never build it.

    Attributes:
        run_id: the run's id.
        workflow: the orchestrator class's stable name.
    """

    def __init__(self, run_id: str, workflow: str) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.status = RunStatus.RUNNING
        self.started = time.time()
        self.metrics: dict[str, float] = {}
        self.replayed_steps = 0
        self._done = anyio.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._cancel_scope: anyio.CancelScope | None = None
        self._cancelled = False
        self._subscribers: list[MemoryObjectSendStream[RunEvent]] = []
        # late subscribers see the recent past (events(replay=True))
        self._history: deque[RunEvent] = deque(maxlen=256)

    # --- events ----------------------------------------------------------------

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
                self._subscribers.remove(stream)

    async def events(self, *, replay: bool = True) -> AsyncIterator[RunEvent]:
        """Yield the run's events as they happen, ending when the run ends.

        With ``replay`` the events emitted before the call come first.
        """
        send, receive = anyio.create_memory_object_stream[RunEvent](math.inf)
        if replay:
            for past in self._history:
                send.send_nowait(past)
        if self._done.is_set():
            send.close()
        else:
            self._subscribers.append(send)
        async with receive:
            async for event in receive:
                yield event

    # --- outcome ---------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether the run ended (finished, failed, paused, cancelled or crashed here)."""
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait until the run ends, without raising its error."""
        await self._done.wait()

    async def result(self) -> Any:
        """Wait for the run and return its result.

        Raises:
            RunPaused: the run waits for input.
            RunFailedError: the run failed (the cause is chained).
            StorageError: the run's log could not be written.
        """
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        """Stop the run; it is marked cancelled and will not be recovered."""
        self._cancelled = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    def _finish(
        self, status: RunStatus, result: Any = None, error: BaseException | None = None
    ) -> None:
        self.status = status
        self._result = result
        self._error = error
        self._done.set()
        for stream in self._subscribers:
            stream.close()
        self._subscribers.clear()
