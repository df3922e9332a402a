"""The three agent roles: Orchestrator, Specialist and Evaluator.

Roles are markers on ``Actor.role`` that the runtime's snapshot triggers
read; the mechanisms (steps, phases, progress) live in ``actorflow.runtime``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from actorflow.runtime import Actor, current_step, load_progress, report, save_progress

if TYPE_CHECKING:
    from actorflow.runtime import RunContext, StepInfo

__all__ = ["Evaluator", "Orchestrator", "Specialist"]

T = TypeVar("T")


class Orchestrator(Actor):
    """Drives a run: ``async def run(self, ctx, input)`` plus ``@phase`` methods.

    A fresh instance runs for every run and every re-run after a crash; its
    attributes are rebuilt by replay, never restored, so keep what must
    survive in phase results and agents' states.
    """

    role: ClassVar[str] = "orchestrator"
    # a base to subclass: a stored run never resolves to it
    __actorflow_abstract__: ClassVar[bool] = True

    async def run(self, ctx: RunContext, input: Any) -> Any:
        """The workflow; override it."""
        raise NotImplementedError(
            f"{type(self).__qualname__} must define `async def run(self, ctx, input)`"
        )


class Specialist(Actor):
    """Does one kind of work; shares no state with other agents."""

    role: ClassVar[str] = "specialist"
    __actorflow_abstract__: ClassVar[bool] = True

    @property
    def step(self) -> StepInfo | None:
        """The workflow step being served (its ``key`` is the idempotency key)."""
        return current_step()

    async def save_progress(self, value: Any) -> None:
        """Record progress in the middle of a task; a retried task resumes from it."""
        await save_progress(value)

    def load_progress(self, type_: type[T]) -> T | None:
        """The last progress saved for the current task (also before a crash), or None."""
        return load_progress(type_)

    def report(self, **counters: float) -> None:
        """Add to the run's metrics (``api_calls=1, tokens=812``...) for this step."""
        report(**counters)


class Evaluator(Specialist):
    """Scores work; replies carry a ``confidence`` between 0 and 1 the triggers read."""

    role: ClassVar[str] = "evaluator"
    __actorflow_abstract__: ClassVar[bool] = True
