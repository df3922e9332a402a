"""actorflow: multi-agent workflows as actors that survive crashes."""

from __future__ import annotations

from actorflow import errors
from actorflow._log import configure_logging
from actorflow.agents import Evaluator, Orchestrator, Specialist, phase, update
from actorflow.runtime import (
    Actor,
    ActorRef,
    AdoptionPolicy,
    CheckpointTriggers,
    Determinism,
    Durability,
    Limit,
    PendingWait,
    Queue,
    Request,
    RetryAfter,
    RetryPolicy,
    RunContext,
    RunHandle,
    RunQuery,
    Runtime,
    RuntimeConfig,
    ScheduleInfo,
    SupervisorPolicy,
    current_step,
    handler,
)
from actorflow.storage import RunStatus

__all__ = [
    "Actor",
    "ActorRef",
    "AdoptionPolicy",
    "CheckpointTriggers",
    "Determinism",
    "Durability",
    "Evaluator",
    "Limit",
    "Orchestrator",
    "PendingWait",
    "Queue",
    "Request",
    "RetryAfter",
    "RetryPolicy",
    "RunContext",
    "RunHandle",
    "RunQuery",
    "RunStatus",
    "Runtime",
    "RuntimeConfig",
    "ScheduleInfo",
    "Specialist",
    "SupervisorPolicy",
    "configure_logging",
    "current_step",
    "errors",
    "handler",
    "phase",
    "update",
]
__version__ = "0.1.0"
