"""``ctx.gather``: many steps awaited at once, and ``ctx.send``'s step.

Kept apart from the run context: this is where asks are recorded as their
replies come in (in argument order, without a task per step) and where a
failure hands the rest to tasks of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import StepFailedError
from actorflow.runtime._steps_impl import AskStep, Step

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from actorflow.runtime._cell import Reply
    from actorflow.runtime._recorder import Recorder

__all__ = ["PauseRun", "SendStep", "gather_steps"]


class PauseRun(BaseException):
    """Raised by ``ctx.wait_for_input`` when no answer is recorded yet."""

    def __init__(self, step_id: str, prompt: str) -> None:
        self.step_id = step_id
        self.prompt = prompt


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
            if aw.record is not None and aw._inline:
                # a recorded outcome needs no delivery and no task: a
                # recovery replays thousands of these
                aw._claim()
                try:
                    outcomes[i] = aw._replay(aw.record)
                except StepFailedError as exc:
                    failed[i] = exc
                continue
            await aw._start()
        elif isinstance(aw, SendStep):
            await aw._start()
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

    Asks are recorded in argument order in this task, as their replies
    come in: no task per step, one flush for all in ``sync`` mode. The
    rest finish concurrently as tasks, where retries wait for no one: from
    the first ask with a timeout, a deliver error or anything that is not
    an ask, and as soon as any ask's reply is a failure, wherever it is.
    """
    done = 0
    watch = _Watch(live)
    try:
        for i, aw in live:
            if watch.failed or type(aw) is not AskStep or aw._timeout:
                break
            if not aw._answered():
                pending = aw._pending
                if pending is None:  # not delivered: the retry path decides
                    break
                if not pending.event.is_set():
                    await watch.wait_for(pending)
                if pending.error is not None or not pending.event.is_set():
                    break
            try:
                outcomes[i] = await aw._live_answered()
            except Exception as exc:
                failed[i] = exc
            done += 1
    except BaseException:
        for _, aw in live[done:]:
            if isinstance(aw, AskStep):
                aw._abandon()
        raise
    if done:
        await recorder.after_step()
        live = live[done:]
        if not live:
            return

    async def finish(i: int, aw: Awaitable[Any]) -> None:
        try:
            if isinstance(aw, Step | SendStep):
                outcomes[i] = await aw._finish()
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


class SendStep:
    """``ctx.send``: delivered when awaited; its completion is recorded in the background."""

    def __init__(self, step: AskStep[Any]) -> None:
        self._step = step
        self.id = step.id

    def __await__(self) -> Any:
        return self._run().__await__()

    async def _run(self) -> None:
        await self._start()
        await self._finish()

    async def _start(self) -> None:
        await self._step._start()

    async def _finish(self) -> None:
        step = self._step
        if step.record is not None:
            if step.record.error is not None:
                raise step._failure(step.record.error)
            return
        step._ctx._runner.track_send(step._ns, step._live)


class _Watch:
    """Waits for one reply of a gather, waking early if any of its replies fails."""

    __slots__ = ("_awaited", "_wake", "failed")

    def __init__(self, live: list[tuple[int, Awaitable[Any]]]) -> None:
        self.failed = False
        self._awaited: Reply | None = None
        self._wake: anyio.Event | None = None
        for _, aw in live:
            pending = aw._pending if type(aw) is AskStep else None
            if pending is not None:
                if pending.error is not None:
                    self.failed = True
                pending.notify = self._notify

    async def wait_for(self, reply: Reply) -> None:
        """Until ``reply`` is in or some reply failed."""
        self._awaited = reply
        self._wake = anyio.Event()
        try:
            await self._wake.wait()
        finally:
            # the reply holds this watch (``notify``): leave no cycle behind
            self._awaited = None

    def _notify(self, reply: Reply) -> None:
        if reply.error is not None:
            self.failed = True
        elif reply is not self._awaited:
            return
        if self._wake is not None:
            self._wake.set()
