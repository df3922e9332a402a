"""Replaying stored runs against the code now imported: what ``actorflow replay`` and
``actorflow.testing.replay`` use (see docs/deploying.md).

A replay is what a recovery with today's code would do, stopped where the
recorded history ends: every recorded step is checked against what the code
issues now and its recorded outcome fed back; no agent is started or run and
nothing is written to the store.

.. versionadded:: 0.5
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actorflow.runtime.workflow._history_file import (
    FORMAT,
    FORMAT_VERSION,
    HistoryFile,
    decode_history,
    encode_history,
    read_history_file,
    redact,
    write_history_file,
)
from actorflow.runtime.workflow._replayer import (
    Divergence,
    ReplayReport,
    RunHistory,
    read_run_history,
    replay_history,
)

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Divergence",
    "HistoryFile",
    "ReplayReport",
    "RunHistory",
    "decode_history",
    "encode_history",
    "read_history_file",
    "read_run_history",
    "redact",
    "replay_history",
    "replay_run",
    "write_history_file",
]


async def replay_run(store: Store, run_id: str, workflow: type[Any]) -> ReplayReport:
    """Replay stored run ``run_id`` against ``workflow``; reads ``store``, never writes to it.

    Raises:
        RunNotFoundError: no such run.
        CorruptedDataError: its log (or a state blob) is damaged.
        IncompatibleStateError: an agent's stored state cannot become its class's state now.
    """
    return await replay_history(await read_run_history(store, run_id), workflow)
