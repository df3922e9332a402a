"""The actor runtime: actors, refs, mailboxes, supervision, runs and recovery."""

from __future__ import annotations

from actorflow.runtime.actors._actor import (
    Actor,
    Request,
    current_message_meta,
    handler,
    state_type,
)
from actorflow.runtime.actors._mailbox import MailboxStatistics
from actorflow.runtime.actors._ref import ActorRef
from actorflow.runtime.actors._registry import class_name, lookup, register
from actorflow.runtime.actors._scope import ActorScope
from actorflow.runtime.actors._supervisor import SupervisorPolicy
from actorflow.runtime.workflow._config import (
    CheckpointTriggers,
    Durability,
    RuntimeConfig,
    parse_duration,
)
from actorflow.runtime.workflow._context import RunContext
from actorflow.runtime.workflow._handle import RunEvent, RunHandle
from actorflow.runtime.workflow._progress import (
    StepInfo,
    current_step,
    load_progress,
    report,
    save_progress,
)
from actorflow.runtime.workflow._runtime import Runtime
from actorflow.runtime.workflow._steps import Step

__all__ = [
    "Actor",
    "ActorRef",
    "ActorScope",
    "CheckpointTriggers",
    "Durability",
    "MailboxStatistics",
    "Request",
    "RunContext",
    "RunEvent",
    "RunHandle",
    "Runtime",
    "RuntimeConfig",
    "Step",
    "StepInfo",
    "SupervisorPolicy",
    "class_name",
    "current_message_meta",
    "current_step",
    "handler",
    "load_progress",
    "lookup",
    "parse_duration",
    "register",
    "report",
    "save_progress",
    "state_type",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
