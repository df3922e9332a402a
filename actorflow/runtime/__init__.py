"""The actor runtime: actors, refs, mailboxes, supervision, runs and recovery.

What users call is here. Implementers of a cluster engine find its interface
in :mod:`actorflow.runtime.cluster`, and tools that resolve stored class
names the class registry in :mod:`actorflow.runtime.registry`; those names
stay importable from here too. Tools that read stored runs without running
them (runs, records, checkpoints, a run's query) find their readers in
:mod:`actorflow.runtime.reading`.
"""

from __future__ import annotations

from actorflow.runtime.actors import (
    Actor,
    ActorRef,
    ActorScope,
    LocalRef,
    MailboxStatistics,
    Request,
    SupervisorPolicy,
    current_message_meta,
    handler,
    state_type,
)

# For implementers, still importable from here (they were before): their own modules list them.
from actorflow.runtime.cluster import AgentPlacer as AgentPlacer
from actorflow.runtime.cluster import Cluster as Cluster
from actorflow.runtime.cluster import ClusterRuntime as ClusterRuntime
from actorflow.runtime.cluster import RemoteStep as RemoteStep
from actorflow.runtime.flow import Clock, Limit, LimitStats, RetryAfter, RetryPolicy, SystemClock
from actorflow.runtime.registry import class_name as class_name
from actorflow.runtime.registry import lookup as lookup
from actorflow.runtime.registry import register
from actorflow.runtime.workflow._adoption import AdoptionPolicy
from actorflow.runtime.workflow._compare import (
    Compared,
    ComparedRun,
    FieldChange,
    RunComparison,
    compare_runs,
)
from actorflow.runtime.workflow._config import (
    CheckpointTriggers,
    Durability,
    RuntimeConfig,
    parse_duration,
)
from actorflow.runtime.workflow._context import RunContext
from actorflow.runtime.workflow._determinism import Determinism
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
from actorflow.runtime.workflow._queues import Queue
from actorflow.runtime.workflow._runtime import Runtime
from actorflow.runtime.workflow._schedules import ScheduleInfo, Schedules, list_schedules
from actorflow.runtime.workflow._stream import Emitted, EventStream
from actorflow.runtime.workflow._update_handlers import update
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
from actorflow.runtime.workflow.steps import ChildRun, Step

__all__ = [
    "Actor",
    "ActorRef",
    "ActorScope",
    "AdoptionPolicy",
    "CheckpointSaved",
    "CheckpointTriggers",
    "ChildRun",
    "Clock",
    "Compared",
    "ComparedRun",
    "DecisionMade",
    "Determinism",
    "Durability",
    "EmitRecorded",
    "EmitStreamed",
    "EmitsLost",
    "Emitted",
    "EventStream",
    "FieldChange",
    "Limit",
    "LimitStats",
    "LocalRef",
    "MailboxStatistics",
    "PendingWait",
    "PhaseEnded",
    "Queue",
    "Recorded",
    "Request",
    "RetryAfter",
    "RetryPolicy",
    "RunComparison",
    "RunContext",
    "RunEnded",
    "RunEvent",
    "RunHandle",
    "RunQuery",
    "Runtime",
    "RuntimeConfig",
    "ScheduleInfo",
    "Schedules",
    "StatusChanged",
    "Step",
    "StepCompleted",
    "StepInfo",
    "SupervisorPolicy",
    "SystemClock",
    "WatchEvent",
    "compare_runs",
    "current_message_meta",
    "current_step",
    "handler",
    "list_schedules",
    "load_progress",
    "parse_duration",
    "phase_of",
    "register",
    "report",
    "save_progress",
    "state_type",
    "update",
    "watch_run",
]

for _name in __all__:
    if _name != "WatchEvent":  # a union of the watch's event classes: nothing to rename
        globals()[_name].__module__ = __name__
del _name
