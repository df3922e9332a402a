"""Reading a store without running anything: the readers behind ``actorflow`` and ``actorflow ui``.

Runs listed with where they stand, checkpoints verified, snapshots and
records decoded without their types, two snapshots diffed, a store validated.
The command line renders these as tables and JSON, the inspector as pages;
neither decodes a store's files itself, so a change of format is met here.
"""

from __future__ import annotations

from actorflow.runtime.inspection._inspect import (
    Problem,
    ValidationReport,
    checkpoint_rows,
    decode_value,
    diff_snapshots,
    live_snapshots,
    plain,
    read_message,
    record_to_dict,
    resolve_checkpoint,
    snapshot_to_dict,
    validate_store,
)
from actorflow.runtime.inspection._messages import find_message_type
from actorflow.runtime.inspection._runs import (
    ListedRun,
    RunProgress,
    SealedRun,
    list_runs,
    run_progress,
)
from actorflow.runtime.reading import query_run

__all__ = [
    "ListedRun",
    "Problem",
    "RunProgress",
    "SealedRun",
    "ValidationReport",
    "checkpoint_rows",
    "decode_value",
    "diff_snapshots",
    "find_message_type",
    "list_runs",
    "live_snapshots",
    "plain",
    "query_run",
    "read_message",
    "record_to_dict",
    "resolve_checkpoint",
    "run_progress",
    "snapshot_to_dict",
    "validate_store",
]
