"""For tools that read stored runs without running them: the command line, the inspector, yours.

Users ask a runtime (``Runtime.query``, ``Runtime.watch``) or call
:func:`actorflow.runtime.watch_run`. A tool that holds only a store reads a
run as the runtime would, from any process, owning nothing, and never
importing or running the code that wrote it:

- where runs stand: :func:`query_run` gives the same
  :class:`~actorflow.runtime.RunQuery` as ``Runtime.query``;
  :func:`list_runs` and :func:`run_progress` list runs with their phase, last
  activity and claim (:class:`ListedRun`, :class:`SealedRun`);
  :func:`queue_stats` each queue's depth, waits and runs against its cap
  (:class:`QueueStats`; :func:`count_queues` from manifests already read);
- the log: :func:`record_to_dict` gives a record as plain data, its values
  decoded; :func:`read_message` the message a step sent; a wait's request is
  in the event of kind ``<kind>_requested`` for a ``kind`` in
  :data:`WAIT_KINDS`, decoded by :func:`read_request`;
- checkpoints: :func:`checkpoint_rows` (verified), :func:`resolve_checkpoint`,
  :func:`live_snapshots`, :func:`snapshot_to_dict`, and
  :func:`diff_snapshots` between two;
- the store: :func:`validate_store` (a :class:`ValidationReport` of
  :class:`Problem` entries);
- values: stored values (inputs, results, states, replies, messages) become
  plain data with :func:`decode_plain` and :func:`plain`;
  :func:`field_changes` says how two differ; :func:`find_message_type` finds a
  message class by the name a run stores it under.

The command line renders these as tables and JSON, the inspector as pages;
neither decodes a store's files itself, so a change of format is met here.

.. versionchanged:: 0.6
   ``actorflow.runtime.inspection`` folded in: one module for reading stores.
"""

from __future__ import annotations

from actorflow.runtime.reading._inspect import (
    Problem,
    ValidationReport,
    checkpoint_rows,
    diff_snapshots,
    live_snapshots,
    read_message,
    record_to_dict,
    resolve_checkpoint,
    snapshot_to_dict,
    validate_store,
)
from actorflow.runtime.reading._messages import find_message_type
from actorflow.runtime.reading._queues import QueueStats, count_queues, queue_stats
from actorflow.runtime.reading._runs import (
    ListedRun,
    RunProgress,
    SealedRun,
    list_runs,
    run_progress,
)
from actorflow.runtime.workflow._plain import decode_plain, field_changes, plain
from actorflow.runtime.workflow._query import query_run
from actorflow.runtime.workflow._wait_records import WAIT_KINDS, WaitRequest, read_request

__all__ = [
    "WAIT_KINDS",
    "ListedRun",
    "Problem",
    "QueueStats",
    "RunProgress",
    "SealedRun",
    "ValidationReport",
    "WaitRequest",
    "checkpoint_rows",
    "count_queues",
    "decode_plain",
    "diff_snapshots",
    "field_changes",
    "find_message_type",
    "list_runs",
    "live_snapshots",
    "plain",
    "query_run",
    "queue_stats",
    "read_message",
    "read_request",
    "record_to_dict",
    "resolve_checkpoint",
    "run_progress",
    "snapshot_to_dict",
    "validate_store",
]

# documented here, where users import them from (a frozenset has no module to give)
for _name in __all__:
    _thing = globals()[_name]
    if _name != "WAIT_KINDS":
        _thing.__module__ = __name__
del _name, _thing
