"""Where runs live: records, codec, the ``Store`` protocol and its backends."""

from __future__ import annotations

from actorflow.storage._protocol import Lease, PruneReport, RetentionPolicy, Store
from actorflow.storage._records import (
    FORMAT_VERSION,
    AgentSnapshot,
    DecisionRecord,
    ErrorInfo,
    EventRecord,
    LogRecord,
    MilestoneRecord,
    PhaseEndRecord,
    RunManifest,
    RunStatus,
    Snapshot,
    SnapshotInfo,
    SnapshotStatus,
    StateRef,
    StepRecord,
    validate_run_id,
)

__all__ = [
    "FORMAT_VERSION",
    "AgentSnapshot",
    "DecisionRecord",
    "ErrorInfo",
    "EventRecord",
    "Lease",
    "LogRecord",
    "MilestoneRecord",
    "PhaseEndRecord",
    "PruneReport",
    "RetentionPolicy",
    "RunManifest",
    "RunStatus",
    "Snapshot",
    "SnapshotInfo",
    "SnapshotStatus",
    "StateRef",
    "StepRecord",
    "Store",
    "validate_run_id",
]
