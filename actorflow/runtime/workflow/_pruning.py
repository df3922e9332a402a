"""Retention after a run: whether a finished run needs a look, the prune off its path, the wait.

The attempt that ends a run says whether the retention policy should look at
it (:func:`worth_pruning`); the :class:`Pruner` prunes it in the background
once its snapshots are written, and a runtime that stops waits for what it
started, within its shutdown timeout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from actorflow._log import get_logger
from actorflow._text import error_message
from actorflow.errors import StorageError
from actorflow.storage import RunStatus, prune_run

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from actorflow.runtime.actors import ActorSystem
    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.storage import RetentionPolicy, Store

__all__ = ["Pruner", "worth_pruning"]

_log = get_logger("actorflow.runtime")


def worth_pruning(
    status: RunStatus, policy: RetentionPolicy | None, *, written: int, fresh: bool
) -> bool:
    """Whether the retention policy should look at a run whose attempt ended ``status``.

    Only a completed run, under a policy. A ``fresh`` run that ran in one
    go, writing ``written`` snapshots, has no snapshots but its own:
    keeping the last N (per run or per phase) keeps them all. Age and
    deleting completed runs need a look.
    """
    if status is not RunStatus.COMPLETED or policy is None:
        return False
    return not (fresh and _nothing_to_prune(policy, written))


def _nothing_to_prune(policy: RetentionPolicy, written: int) -> bool:
    return (
        policy.keep_last is not None
        and written <= policy.keep_last
        and policy.max_age is None
        and not policy.delete_completed
    )


class Pruner:
    """Prunes finished runs off their path; a runtime waits for it before it closes."""

    def __init__(self) -> None:
        self.pending = 0
        self._idle = anyio.Event()

    def after_run(
        self,
        store: Store,
        tracker: RunTracker,
        policy: RetentionPolicy | None,
        system: ActorSystem,
    ) -> None:
        """Apply ``policy`` to ``tracker``'s finished run in ``system``'s task group.

        After the run's snapshots still queued are written; not at all if
        they leave nothing to prune (the tracker says), if there is no
        policy, or if the runtime no longer runs.
        """
        if policy is not None and system.running:
            task_group = system.require_running("prune a run")
            self.soon(
                store,
                tracker.run_id,
                policy,
                task_group,
                after=tracker.checkpoints_written,
                keeps_every=tracker.keeps_every_checkpoint,
            )

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

    async def settle(self, timeout: float) -> None:  # noqa: ASYNC109
        """Wait for the prunes started, for at most ``timeout`` seconds; never raises on it.

        Prunes still running then are left to their task group's owner to cancel.
        """
        if self.pending:
            with anyio.move_on_after(timeout):
                await self.wait()
