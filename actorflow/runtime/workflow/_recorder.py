"""One live run's bookkeeping: records into the log and the view, flush policy, triggers.

Every step of a run ends here as a record. The recorder appends it to the
run's ``LogWriter`` (durable by the durability mode's rule), applies it to the
``RunView`` (so replay lookups and snapshots see it at once) and asks the
checkpoint actor for a snapshot when a trigger fires.

In ``batched`` mode the output-commit rule says when a record *must* be
durable (before anything depending on it leaves the orchestrator); the flush
behind bounds how long it *may* stay in memory: ``flush_delay`` after the
first record of a group, one append carries the group, dependency or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from actorflow._text import error_message
from actorflow.errors import ActorflowError
from actorflow.runtime.workflow._config import Durability
from actorflow.runtime.workflow._triggers import TriggerPolicy
from actorflow.storage import StepRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._replay import Capture, RunView
    from actorflow.storage import LogRecord, LogWriter, Store

__all__ = ["Recorder"]


class Recorder:
    """Appends a run's records, keeps its view current and fires snapshot triggers."""

    def __init__(
        self,
        *,
        run_id: str,
        store: Store,
        writer: LogWriter,
        view: RunView,
        config: RuntimeConfig,
        request_snapshot: Callable[[Capture], None],
        emit: Callable[..., None],
        attempt: int = 0,
    ) -> None:
        self.run_id = run_id
        # the run's attempt (the manifest's): its step records say they were recorded in it
        self.attempt = attempt
        self.store = store
        self.writer = writer
        self.view = view
        self.config = config
        self.durability = config.durability
        self.triggers = TriggerPolicy(config.triggers)
        self._request_snapshot = request_snapshot
        self.emit = emit
        # the flush behind: where its timer runs, and the timer's scope while one is set
        self._behind: TaskGroup | None = None
        self._timer: anyio.CancelScope | None = None
        # a recovery attempt's note of its first durable record (see on_progress)
        self._progress: tuple[int, Callable[[], Awaitable[None]]] | None = None

    # --- records -----------------------------------------------------------

    def record(self, record: LogRecord) -> int:
        """Append ``record`` (buffered) and take it into the view; return its position."""
        position = self.writer.add(record)
        if self._timer is None and self._behind is not None:
            self._timer = anyio.CancelScope()
            self._behind.start_soon(self._flush_behind, self._timer)
        if isinstance(record, StepRecord):
            view = self.view
            before = view.confidence_of(record.target)
            view.apply(record)
            trigger = self.triggers.after_step(record, view, before)
            if trigger is not None:
                self.snapshot(trigger)
        else:
            self.view.apply(record)
        return position

    async def flush(self) -> None:
        """Make every record so far durable (one shared fsync for all waiters)."""
        await self._flush()

    def on_progress(self, after: int, note: Callable[[], Awaitable[None]]) -> None:
        """Await ``note`` once, in the first flush after which a record at ``after`` is durable.

        A recovery attempt notes so that it made progress; the flusher waits
        for the note, so the run goes on only once it is kept.
        """
        self._progress = (after, note)

    async def _flush(self) -> None:
        await self.writer.flush()
        progress = self._progress
        if progress is not None and self.writer.durable > progress[0]:
            self._progress = None
            try:
                await progress[1]()
            except BaseException:
                self._progress = progress  # cancelled before it was kept: the next flush notes it
                raise

    def flush_behind(self, task_group: TaskGroup) -> None:
        """Start bounding the loss window (``batched`` mode; other modes ignore it).

        Each group of records gets one timer in ``task_group``, started by its
        first record; ``stop_flushing_behind`` cancels a timer still waiting.
        """
        if self.durability is Durability.BATCHED:
            self._behind = task_group

    def stop_flushing_behind(self) -> None:
        """No more timers: the run's final flush carries whatever is left."""
        self._behind = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _flush_behind(self, timer: anyio.CancelScope) -> None:
        with timer:
            await anyio.sleep(self.config.flush_delay)
            # records added from here on start the next timer (or ride on this append)
            self._timer = None
            try:
                await self._flush()
            except ActorflowError as exc:
                # the records stay buffered and the run's own next flush meets the
                # error where it can act on it (retry, or stop a fenced writer)
                self.emit("log_flush_failed", error=error_message(exc), level="warning")

    async def output_barrier(self) -> None:
        """Flush before something that depends on earlier records leaves the orchestrator."""
        if self.durability is not Durability.PHASE:
            await self._flush()

    def barrier_needed(self) -> bool:
        """Whether ``output_barrier`` has anything to flush (checked without awaiting)."""
        writer = self.writer
        return self.durability is not Durability.PHASE and writer.position > writer.durable

    async def after_step(self) -> None:
        """In ``sync`` mode a step's record is durable before its result is seen."""
        if self.durability is Durability.SYNC:
            await self._flush()

    async def after_phase(self) -> None:
        """In ``sync`` and ``phase`` modes a phase's end is durable before its result is seen.

        (In ``sync`` mode a phase without steps inside, a unit of pure work,
        would otherwise stay in memory until something depended on it.)
        """
        if self.durability is not Durability.BATCHED:
            await self._flush()

    # --- snapshots ---------------------------------------------------------

    def snapshot(self, trigger: str) -> None:
        """Ask the checkpoint actor for a snapshot at the current position."""
        self.triggers.taken()
        self._request_snapshot(self.view.snapshot(trigger))
