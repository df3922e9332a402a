"""``ctx.gather``: many steps (and phase calls) awaited at once.

Kept apart from the run context: this is where steps are started in order,
recorded ones replayed without a task, plain asks handed to their fast path
(``record_as_answered``: recorded as their replies come in, without a task
per step) and where a failure hands the rest to tasks of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import StepFailedError
from actorflow.runtime.workflow.steps import AskStep, PauseRun, Step, record_as_answered

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from actorflow.runtime.workflow._recorder import Recorder

__all__ = ["gather_steps"]


async def gather_steps(recorder: Recorder, steps: Sequence[Awaitable[Any]]) -> list[Any]:
    """``ctx.gather``: await steps (and phase calls) concurrently; results in argument order.

    Messages are delivered in step order. Raises the first failure in
    argument order (not an exception group), after the others finished.
    """
    n = len(steps)
    outcomes: list[Any] = [None] * n
    failed: list[BaseException | None] = [None] * n
    live: list[tuple[int, Awaitable[Any]]] = []
    for i, aw in enumerate(steps):
        if isinstance(aw, Step):
            if aw.inline and aw.recorded:
                # a recorded outcome needs no delivery and no task: a
                # recovery replays thousands of these
                aw.claim()
                try:
                    outcomes[i] = aw.replay()
                except StepFailedError as exc:
                    failed[i] = exc
                continue
            await aw.start()
        live.append((i, aw))
    if live:
        await _finish_live(recorder, live, outcomes, failed)
    for error in failed:
        if error is not None:
            raise error
    return outcomes


async def _finish_live(
    recorder: Recorder,
    live: list[tuple[int, Awaitable[Any]]],
    outcomes: list[Any],
    failed: list[BaseException | None],
) -> None:
    """Finish the delivered steps (and phase calls) of a gather.

    A gather of plain asks (delivered, no timeout) is finished in this task,
    without a task per step: each ask is recorded as its reply comes in, and
    in ``sync`` mode made durable then (records of one agent stay in its
    handling order). Anything else, and every ask left once any reply is a
    failure, finishes concurrently as tasks, where retries wait for no one.
    """
    asks = [(i, aw) for i, aw in live if isinstance(aw, AskStep) and aw.gathers_inline()]
    if len(asks) == len(live):
        live = [(i, aw) for i, aw in await record_as_answered(recorder, asks, outcomes, failed)]
        if not live:
            return

    async def finish(i: int, aw: Awaitable[Any]) -> None:
        try:
            if isinstance(aw, Step):
                outcomes[i] = await aw.finish()
            else:
                outcomes[i] = await aw
        except (Exception, PauseRun) as exc:
            # a pause inside a gathered phase pauses the run, not the task group
            failed[i] = exc

    if len(live) == 1:
        await finish(*live[0])
    elif live:
        async with anyio.create_task_group() as tg:
            for i, aw in live:
                tg.start_soon(finish, i, aw)
