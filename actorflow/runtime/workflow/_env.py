"""``StepEnv``: the one typed object every step of an attempt at a run receives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._agents import RunAgents
    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._flow import FlowControl
    from actorflow.runtime.workflow._otel import RunTrace
    from actorflow.runtime.workflow._recorder import Recorder
    from actorflow.runtime.workflow._replay import RunView
    from actorflow.runtime.workflow._signals import SignalDesk
    from actorflow.runtime.workflow._stream import EmitSink
    from actorflow.runtime.workflow.steps._turnstile import Turnstile

__all__ = ["ChildRuns", "HistoryEnd", "StepEnv"]


class ChildRuns(Protocol):
    """What a run's steps need of its runtime to start child runs and follow them."""

    async def start(
        self,
        workflow: type[object],
        input: object,
        *,
        child_id: str,
        parent_run: str,
        parent_step: str,
    ) -> None:
        """Create the child run and drive it here; re-attach if it exists already.

        Raises:
            RunInputMismatchError: a run ``child_id`` exists with another input.
        """
        ...

    async def reattach(self, child_id: str, parent_run: str, *, post: bool) -> None:
        """See that the child goes on: drive it here if it is an orphan.

        With ``post``, a finished child's end is posted to ``parent_run``
        again (a lost post is made good; a repeat adds nothing).
        """
        ...

    def adopt(self, parent_run: str, child_id: str) -> None:
        """Cancel ``child_id`` when the parent's attempt in this runtime ends cancelled."""
        ...


class HistoryEnd(BaseException):  # not an error: where a replay stops
    """A replay reached a step its history has no record of: a recovery would go on live here.

    A ``BaseException``, like a cancellation, so orchestrator code catching
    ``Exception`` cannot swallow it.
    """

    def __init__(self, step_id: str, kind: str, where: str) -> None:
        self.step_id = step_id
        self.kind = kind
        self.where = where
        super().__init__(f"no record of {kind} step {step_id} ({where}): the history ends here")


class StepEnv:
    """What a step needs of its run: records, the replay view, agents, options, a task group.

    Attributes:
        run_id: the run's id.
        recorder: appends the step's record (and decides when it is durable).
        view: the run as recorded so far: what replays, what runs live.
        agents: the run's agents (its actor scope).
        config: the runtime's options (timeouts, retries, durability).
        task_group: hosts work that outlives one step (a ``ctx.send``'s completion).
        signals: hands the run's inbox entries to its waits.
        children: starts the run's child runs and follows them (None: it cannot).
        publish: where the orchestrator's emitted events go (the run's
            ``handle.events()`` readers), or None.
        turnstiles: per agent, the order its step records keep (``AskStep``).
        trace: the attempt's spans and metrics, or None when tracing is off.
        flow: the runtime's clock and limiters (retry backoffs, ``Limit``).
        replaying: a replay of a stored history (``actorflow replay``): a step
            with no record raises ``HistoryEnd`` instead of running live.
    """

    __slots__ = (
        "agents",
        "children",
        "config",
        "flow",
        "publish",
        "recorder",
        "replaying",
        "run_id",
        "signals",
        "task_group",
        "trace",
        "turnstiles",
        "view",
    )

    def __init__(
        self,
        *,
        recorder: Recorder,
        agents: RunAgents,
        config: RuntimeConfig,
        task_group: TaskGroup,
        signals: SignalDesk,
        flow: FlowControl,
        children: ChildRuns | None = None,
    ) -> None:
        self.run_id = recorder.run_id
        self.recorder = recorder
        self.view: RunView = recorder.view
        self.agents = agents
        self.config = config
        self.task_group = task_group
        self.signals = signals
        self.children = children
        self.publish: EmitSink | None = None
        self.turnstiles: dict[str, Turnstile] = {}
        self.trace: RunTrace | None = None
        self.flow = flow
        self.replaying = False
