"""The actor runtime: actors, refs, mailboxes, supervision, runs and recovery."""

from __future__ import annotations

from actorflow.runtime.actors import (
    Actor,
    ActorRef,
    ActorScope,
    MailboxStatistics,
    Request,
    SupervisorPolicy,
    class_name,
    current_message_meta,
    handler,
    lookup,
    register,
    state_type,
)
from actorflow.runtime.workflow._adoption import AdoptionPolicy
from actorflow.runtime.workflow._children import ChildRun
from actorflow.runtime.workflow._cluster import (
    AgentPlacer,
    Cluster,
    ClusterRuntime,
    RemoteStep,
)
from actorflow.runtime.workflow._config import (
    CheckpointTriggers,
    Durability,
    RuntimeConfig,
    parse_duration,
)
from actorflow.runtime.workflow._context import RunContext
from actorflow.runtime.workflow._handle import RunEvent, RunHandle
from actorflow.runtime.workflow._ids import phase_of
from actorflow.runtime.workflow._progress import (
    StepInfo,
    current_step,
    load_progress,
    report,
    save_progress,
)
from actorflow.runtime.workflow._query import RunQuery
from actorflow.runtime.workflow._runtime import Runtime
from actorflow.runtime.workflow._steps import Step
from actorflow.runtime.workflow._stream import Emitted, EventStream
from actorflow.runtime.workflow._wait_records import PendingWait
from actorflow.runtime.workflow._watch import (
    CheckpointSaved,
    DecisionMade,
    EmitRecorded,
    EmitsLost,
    EmitStreamed,
    PhaseEnded,
    Recorded,
    RunEnded,
    StatusChanged,
    StepCompleted,
    WatchEvent,
    watch_run,
)

__all__ = [
    "Actor",
    "ActorRef",
    "ActorScope",
    "AdoptionPolicy",
    "AgentPlacer",
    "CheckpointSaved",
    "CheckpointTriggers",
    "ChildRun",
    "Cluster",
    "ClusterRuntime",
    "DecisionMade",
    "Durability",
    "EmitRecorded",
    "EmitStreamed",
    "EmitsLost",
    "Emitted",
    "EventStream",
    "MailboxStatistics",
    "PendingWait",
    "PhaseEnded",
    "Recorded",
    "RemoteStep",
    "Request",
    "RunContext",
    "RunEnded",
    "RunEvent",
    "RunHandle",
    "RunQuery",
    "Runtime",
    "RuntimeConfig",
    "StatusChanged",
    "Step",
    "StepCompleted",
    "StepInfo",
    "SupervisorPolicy",
    "WatchEvent",
    "class_name",
    "current_message_meta",
    "current_step",
    "handler",
    "load_progress",
    "lookup",
    "parse_duration",
    "phase_of",
    "register",
    "report",
    "save_progress",
    "state_type",
    "watch_run",
]

for _name in __all__:
    if _name != "WatchEvent":  # a union of the watch's event classes: nothing to rename
        globals()[_name].__module__ = __name__
del _name
