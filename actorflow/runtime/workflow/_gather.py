"""``ctx.gather``: many steps (and phase calls) awaited at once.

Kept apart from the run context: this is where asks are recorded as their
replies come in (in argument order, without a task per step) and where a
failure hands the rest to tasks of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import StepFailedError
from actorflow.runtime.workflow._steps import AskStep, Step
from actorflow.runtime.workflow._waits import PauseRun

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from actorflow.runtime.actors import AgentReply
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
    if all(type(aw) is AskStep and not aw.timeout and aw.pending for _, aw in live):
        asks: list[tuple[int, AskStep[Any]]] = live  # type: ignore[assignment]
        live = await _record_as_answered(recorder, asks, outcomes, failed)  # type: ignore[assignment]
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


async def _record_as_answered(
    recorder: Recorder,
    asks: list[tuple[int, AskStep[Any]]],
    outcomes: list[Any],
    failed: list[BaseException | None],
) -> list[tuple[int, AskStep[Any]]]:
    """Record asks as their replies come in; return those left when one failed."""
    watch = _Watch(asks)
    by_reply = {id(aw.pending): (i, aw) for i, aw in asks}
    # replies in before the watch was set, then as they arrive (no rescans)
    answered = [(i, aw) for i, aw in asks if aw.answered()]
    left = {i for i, _ in asks}
    try:
        while left and not watch.failed:
            answered += [by_reply[id(r)] for r in watch.take_arrived() if r.error is None]
            ready = [
                (i, aw) for i, aw in answered if aw.turnstile and aw.turnstile.ready(aw.ticket)
            ]
            if not ready:
                if not answered:
                    await watch.wait_any()
                    continue
                # its agent has an earlier record to come, from another task: wait for it
                ready = answered[:1]
            for i, aw in ready:
                try:
                    outcomes[i] = await aw.finish_answered()
                except Exception as exc:
                    failed[i] = exc
                left.discard(i)
            answered = [(i, aw) for i, aw in answered if i in left]
            await recorder.after_step()  # durable as they come in, in sync mode
    except BaseException:
        for i, aw in asks:
            if i in left:
                aw.abandon()
        raise
    finally:
        watch.take_arrived()  # the replies point at the watch: leave no cycle behind
    return [(i, aw) for i, aw in asks if i in left]


class _Watch:
    """Wakes a gather's recording task whenever one of its replies comes in."""

    __slots__ = ("_arrived", "_wake", "failed")

    def __init__(self, live: list[tuple[int, AskStep[Any]]]) -> None:
        self.failed = False
        self._arrived: list[AgentReply] = []
        self._wake: anyio.Event | None = None
        for _, aw in live:
            pending = aw.pending
            if pending is not None:
                if pending.error is not None:
                    self.failed = True
                pending.notify = self._notify

    async def wait_any(self) -> None:
        """Until another reply is in (or failed)."""
        self._wake = anyio.Event()
        try:
            await self._wake.wait()
        finally:
            self._wake = None

    def take_arrived(self) -> list[AgentReply]:
        """The replies that came in since the last call."""
        arrived, self._arrived = self._arrived, []
        return arrived

    def _notify(self, reply: AgentReply) -> None:
        if reply.error is not None:
            self.failed = True
        self._arrived.append(reply)
        if self._wake is not None:
            self._wake.set()
