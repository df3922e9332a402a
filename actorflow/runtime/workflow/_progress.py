"""What an agent's handler can do with the workflow step it serves."""

from __future__ import annotations

from typing import TypeVar

from actorflow.runtime.workflow._ids import _meta
from actorflow.runtime.workflow._recorder import decode, encode

__all__ = ["load_progress", "report", "save_progress"]

T = TypeVar("T")


async def save_progress(value: object) -> None:
    """Record a milestone for the current step (durable on return); no-op outside a step."""
    meta = _meta()
    if meta is not None:
        await meta.milestone(encode(value, "progress"))


def load_progress(type_: type[T]) -> T | None:
    """The current step's latest milestone decoded as ``type_``, or None."""
    meta = _meta()
    if meta is None or meta.progress is None:
        return None
    return decode(meta.progress, type_, f"progress of step {meta.info.step_id}")  # type: ignore[no-any-return]


def report(**counters: float) -> None:
    """Add ``counters`` to the run's metrics for the current step; no-op outside a step."""
    meta = _meta()
    if meta is None:
        return
    for name, value in counters.items():
        meta.metrics[name] = meta.metrics.get(name, 0.0) + float(value)
