"""``actorflow.testing.replay``: a stored run or an exported history, checked in pytest."""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any

from actorflow.runtime.replaying import (
    ReplayReport,
    RunHistory,
    read_history_file,
    read_run_history,
    replay_history,
)

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = ["replay"]


async def replay(
    history_or_store: RunHistory | Store | str | PathLike[str],
    workflow: type[Any],
    run_id: str | None = None,
) -> ReplayReport:
    """Replay a run against ``workflow`` as a recovery with this code would; report divergences.

    ``history_or_store`` is an exported history (a ``.afh`` file's path, as
    ``actorflow export`` writes it, or a ``RunHistory``) or a store holding
    run ``run_id``. No agent is started or run, nothing is written, and the
    orchestrator runs in strict determinism mode. Assert ``report.ok`` (its
    ``describe()`` says where the code parted from the history).

    Raises:
        ValueError: a store was given without ``run_id``.
        HistoryFileError: the file is truncated, damaged or from a newer actorflow.
        RunNotFoundError: the store has no run ``run_id``.
    """
    if isinstance(history_or_store, RunHistory):
        history = history_or_store
    elif isinstance(history_or_store, str | PathLike):
        history = read_history_file(history_or_store)
    else:
        if run_id is None:
            raise ValueError("replay(store, workflow) needs the run_id of the run to replay")
        history = await read_run_history(history_or_store, run_id)
    return await replay_history(history, workflow)
