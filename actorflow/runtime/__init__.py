"""The actor runtime: actors, refs, mailboxes, supervision, runs and recovery."""

from __future__ import annotations

from actorflow.runtime._actor import Actor, Request, current_message_meta, handler, state_type
from actorflow.runtime._config import CheckpointTriggers, Durability, RuntimeConfig, parse_duration
from actorflow.runtime._context import RunContext
from actorflow.runtime._handle import RunEvent, RunHandle
from actorflow.runtime._mailbox import MailboxStatistics
from actorflow.runtime._progress import load_progress, report, save_progress
from actorflow.runtime._ref import ActorRef
from actorflow.runtime._registry import class_name, lookup, register
from actorflow.runtime._runtime import Runtime
from actorflow.runtime._scope import ActorScope
from actorflow.runtime._steps import StepInfo, current_step
from actorflow.runtime._steps_impl import Step
from actorflow.runtime._supervisor import SupervisorPolicy

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
