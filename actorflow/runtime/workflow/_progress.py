"""The handler's side of a step: what it learns of the step it serves, what it reports back.

A step's message travels with a ``StepMeta``: the step's identity and
idempotency key (``current_step()``), the metrics the handler ``report``s and
its milestones (``save_progress`` / ``load_progress``), which the engine reads
back when it records the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import msgspec

from actorflow.runtime.actors import current_message_meta
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any

    from opentelemetry.trace import Span

    Handler = Callable[[Any, Any], Awaitable[Any]]

__all__ = [
    "StepInfo",
    "StepMeta",
    "current_step",
    "current_step_meta",
    "load_progress",
    "report",
    "save_progress",
]

T = TypeVar("T")


class StepInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a handler learns of the step it serves (``current_step()``).

    ``key`` is the step's idempotency key: the same when the step runs again
    after a crash or a retry, so handlers can make external effects idempotent.
    """

    run_id: str
    step_id: str
    key: str
    attempt: int = 1


class StepMeta:
    """Travels with a step's message; the engine reads metrics and milestones back."""

    __slots__ = ("around", "info", "metrics", "milestone", "progress", "span")

    def __init__(
        self,
        info: StepInfo,
        milestone: Callable[[bytes], Awaitable[None]],
        progress: bytes | None,
    ) -> None:
        self.info = info
        self.metrics: dict[str, float] = {}
        self.milestone = milestone
        self.progress = progress
        # tracing only (actorflow[otel]): what ``ActorRef.deliver`` wraps the
        # handler with, and the step's span (its context travels to other processes)
        self.around: Callable[[Handler, int], Handler] | None = None
        self.span: Span | None = None


def current_step_meta() -> StepMeta | None:
    """The meta of the step the running handler serves, or None."""
    meta = current_message_meta()
    return meta if isinstance(meta, StepMeta) else None


def current_step() -> StepInfo | None:
    """The step the running handler serves, or ``None`` outside a workflow step."""
    meta = current_step_meta()
    return meta.info if meta is not None else None


async def save_progress(value: object) -> None:
    """Record a milestone for the current step (durable on return); no-op outside a step."""
    meta = current_step_meta()
    if meta is not None:
        await meta.milestone(encode(value, "progress"))


def load_progress(type_: type[T]) -> T | None:
    """The current step's latest milestone decoded as ``type_``, or None."""
    meta = current_step_meta()
    if meta is None or meta.progress is None:
        return None
    value: T = decode(meta.progress, type_, f"progress of step {meta.info.step_id}")
    return value


def report(**counters: float) -> None:
    """Add ``counters`` to the run's metrics for the current step; no-op outside a step."""
    meta = current_step_meta()
    if meta is None:
        return
    for name, value in counters.items():
        meta.metrics[name] = meta.metrics.get(name, 0.0) + float(value)
