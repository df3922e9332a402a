"""Retention applied to each finished run in the background, and waited for at shutdown."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from actorflow._log import get_logger
from actorflow._text import error_message
from actorflow.errors import StorageError
from actorflow.storage import prune_run

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from actorflow.storage import RetentionPolicy, Store

__all__ = ["Pruner"]

_log = get_logger("actorflow.runtime")


class Pruner:
    """Prunes finished runs off their path; a runtime waits for it before it closes."""

    def __init__(self) -> None:
        self.pending = 0
        self._idle = anyio.Event()

    def soon(
        self,
        store: Store,
        run_id: str,
        policy: RetentionPolicy,
        task_group: TaskGroup,
        *,
        after: Callable[[], Awaitable[None]] | None = None,
        keeps_every: Callable[[RetentionPolicy], bool] | None = None,
    ) -> None:
        """Apply ``policy`` to the finished run ``run_id`` in ``task_group``, ``after`` it.

        (``after``: the run's snapshots still being written; pruning meanwhile
        would count them wrong.) ``keeps_every``, asked once they are written,
        says the policy keeps every snapshot the run has: the prune, which
        would only read, is skipped (its reads would overlap the next run's work).
        """

        async def prune() -> None:
            try:
                if after is not None:
                    await after()
                if keeps_every is not None and keeps_every(policy):
                    return
                # the finished run's decision log stays readable (`actorflow
                # log`); an explicit prune (`actorflow prune`) shortens logs
                await prune_run(store, run_id, policy, keep_log=True)
            except StorageError as exc:
                _log.warning("prune_failed", run_id=run_id, error=error_message(exc))
            finally:
                self.pending -= 1
                if not self.pending:
                    self._idle.set()

        if not self.pending:
            self._idle = anyio.Event()
        self.pending += 1
        task_group.start_soon(prune)

    async def wait(self) -> None:
        """Wait until every prune started has finished."""
        if self.pending:
            await self._idle.wait()
