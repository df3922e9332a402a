"""``StepEnv``: the one typed object every step of an attempt at a run receives."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._agents import RunAgents
    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._recorder import Recorder
    from actorflow.runtime.workflow._replay import RunView
    from actorflow.runtime.workflow._stream import EmitSink

__all__ = ["StepEnv"]


class StepEnv:
    """What a step needs of its run: records, the replay view, agents, options, a task group.

    Attributes:
        run_id: the run's id.
        recorder: appends the step's record (and decides when it is durable).
        view: the run as recorded so far: what replays, what runs live.
        agents: the run's agents (its actor scope).
        config: the runtime's options (timeouts, retries, durability).
        task_group: hosts work that outlives one step (a ``ctx.send``'s completion).
        publish: where the orchestrator's emitted events go (the run's
            ``handle.events()`` readers), or None.
    """

    __slots__ = ("agents", "config", "publish", "recorder", "run_id", "task_group", "view")

    def __init__(
        self,
        *,
        recorder: Recorder,
        agents: RunAgents,
        config: RuntimeConfig,
        task_group: TaskGroup,
    ) -> None:
        self.run_id = recorder.run_id
        self.recorder = recorder
        self.view: RunView = recorder.view
        self.agents = agents
        self.config = config
        self.task_group = task_group
        self.publish: EmitSink | None = None
