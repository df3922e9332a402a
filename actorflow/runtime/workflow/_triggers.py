"""Why a snapshot is taken: the ``Trigger`` names, and the one policy that reads step records.

Every snapshot carries its trigger as a string (``Snapshot.trigger``, shown by
the CLI); this module is the one place those strings are made and matched.
"""

from __future__ import annotations

import enum
import resource
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.workflow._config import CheckpointTriggers
    from actorflow.runtime.workflow._replay import RunView
    from actorflow.storage import RunStatus, StepRecord

__all__ = ["KEPT_TRIGGERS", "Trigger", "TriggerPolicy", "final_trigger", "manual_trigger"]


class Trigger(enum.StrEnum):
    """What asked for a snapshot (its ``trigger`` field)."""

    PHASE_START = "phase_start"
    PHASE_END = "phase_end"
    MANUAL = "manual"
    ERROR = "error"
    EVALUATION = "evaluation"
    CONFIDENCE = "confidence"
    SPECIALIST_DONE = "specialist_done"
    STEPS = "steps"
    INTERVAL = "interval"
    MEMORY = "memory"
    FORK = "fork"
    # a run's final snapshot is named after the status it ends with
    COMPLETED = "completed"
    FAILED = "failed"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"


KEPT_TRIGGERS = frozenset(
    {
        Trigger.PHASE_END,
        Trigger.COMPLETED,
        Trigger.FAILED,
        Trigger.PAUSED,
        Trigger.CANCELLED,
        Trigger.BLOCKED,
    }
)
"""Triggers whose snapshots a newer request never replaces: phase ends and final
states stay available to fork from and to inspect."""


def manual_trigger(reason: str) -> str:
    """The trigger string of ``ctx.checkpoint(reason)``."""
    return f"{Trigger.MANUAL}:{reason}"


def final_trigger(status: RunStatus) -> Trigger:
    """The trigger of the snapshot a run ends with, named after its final status."""
    return Trigger(str(status))


class TriggerPolicy:
    """Decides, for each step record, whether it asks for a snapshot (and why).

    A trigger that fires within ``min_interval`` of the previous snapshot is
    owed, not dropped: the first step record after the interval takes it.
    Nothing is lost meanwhile (the log holds every record); a burst of
    evaluator replies simply makes one snapshot instead of one each.
    """

    __slots__ = ("_clock", "_last_at", "_owed", "_triggers")

    def __init__(
        self, triggers: CheckpointTriggers, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._triggers = triggers
        self._clock = clock
        self._last_at = clock()
        self._owed: Trigger | None = None

    def taken(self) -> None:
        """A snapshot was just requested: intervals count from now, nothing is owed."""
        self._last_at = self._clock()
        self._owed = None

    def after_step(
        self, record: StepRecord, view: RunView, confidence_before: float | None
    ) -> Trigger | None:
        """The trigger ``record`` fires, ``view`` having taken it in already, or None."""
        fired = self._fired(record, view, confidence_before) or self._owed
        if fired is None:
            return None
        if self._clock() - self._last_at < self._triggers.min_interval:
            self._owed = fired
            return None
        return fired

    def _fired(
        self, record: StepRecord, view: RunView, confidence_before: float | None
    ) -> Trigger | None:
        t = self._triggers
        role = view.roles.get(record.target or "")
        if record.error is not None and t.on_error:
            return Trigger.ERROR
        if record.kind == "ask" and role == "evaluator":
            if t.on_evaluation:
                return Trigger.EVALUATION
            if self._crossed(confidence_before, view.confidence_of(record.target)):
                return Trigger.CONFIDENCE
        if record.kind == "ask" and role == "specialist" and t.on_specialist_done:
            return Trigger.SPECIALIST_DONE
        if t.every_steps and view.steps_since_snapshot >= t.every_steps:
            return Trigger.STEPS
        if t.every_seconds is not None and self._clock() - self._last_at >= t.every_seconds:
            return Trigger.INTERVAL
        memory = t.memory_bytes
        if memory is not None and view.position % 64 == 0 and peak_memory() >= memory:
            return Trigger.MEMORY
        return None

    def _crossed(self, before: float | None, after: float | None) -> bool:
        threshold = self._triggers.confidence_threshold
        if threshold is None or after is None:
            return False
        return before is None or (before >= threshold) != (after >= threshold)


def peak_memory() -> int:
    """The process's peak resident memory in bytes."""
    # ru_maxrss is KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
