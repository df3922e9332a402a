"""Workflows the Ray tests run on hosts (imported there through ``RayCluster(imports=...)``).

Every agent execution appends its step's idempotency key to a side file
(``O_APPEND`` and fsync), so a test knows exactly what ran, and how often,
across processes and nodes. The names carry a ``Ray`` prefix: the registry
finds classes by ``__qualname__``, and other test modules define ``Worker``s.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Specialist, handler
from actorflow.ray import Placement

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class RayJob(msgspec.Struct, frozen=True):
    steps: int
    side: str
    pause: float = 0.0
    placed: bool = False


class RayTask(Request["RayResult"], frozen=True):
    n: int
    side: str
    pause: float = 0.0


class RayResult(msgspec.Struct, frozen=True):
    n: int
    value: int


class RayCount(msgspec.Struct):
    handled: int = 0


def note(side: str, key: str) -> None:
    """Append ``key`` and this process's id to the side file, durably, before the work."""
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class RayWorker(Specialist):
    """Squares numbers; its state counts what it handled, so a lost state changes results."""

    state: RayCount

    @handler
    async def work(self, task: RayTask) -> RayResult:
        step = self.step
        note(task.side, step.key if step is not None else f"{self.name}:{task.n}")
        if task.pause:
            await anyio.sleep(task.pause)  # the work takes a while: a node can die meanwhile
        self.state.handled += 1
        return RayResult(n=task.n, value=task.n * task.n + self.state.handled)


class RayPlacedWorker(RayWorker):
    """The same worker, on a node with the test cluster's ``special`` resource."""

    placement = Placement(resources={"special": 1})


class RayPipeline(Orchestrator):
    """Asks one worker ``steps`` times and sums what it answers."""

    async def run(self, ctx: RunContext, job: RayJob) -> int:
        cls = RayPlacedWorker if job.placed else RayWorker
        worker = await ctx.spawn(cls, name="worker")
        total = 0
        for n in range(job.steps):
            result = await ctx.ask(worker, RayTask(n=n, side=job.side, pause=job.pause))
            total += result.value
        return total


class RayLazyPipeline(Orchestrator):
    """Asks a placed agent whose module only this run imports (placed actors find it by module)."""

    async def run(self, ctx: RunContext, job: RayJob) -> int:
        from tests.ray.lazy import RayLazyPlaced  # registers it here, in the host only

        worker = await ctx.spawn(RayLazyPlaced, name="worker")
        total = 0
        for n in range(job.steps):
            total += (await ctx.ask(worker, RayTask(n=n, side=job.side))).value
        return total


class RayGo(msgspec.Struct, frozen=True):
    """The signal a ``RayGated`` run waits for."""


class RayGated(Orchestrator):
    """A ``RayPipeline`` that waits for ``RayGo`` (live, not paused) before its last ask.

    ``job.steps`` asks, the wait, one more ask: it returns ``expected(job.steps + 1)``.
    """

    async def run(self, ctx: RunContext, job: RayJob) -> int:
        worker = await ctx.spawn(RayPlacedWorker if job.placed else RayWorker, name="worker")
        total = 0
        for n in range(job.steps):
            total += (await ctx.ask(worker, RayTask(n=n, side=job.side))).value
        await ctx.wait_for(RayGo)
        return total + (await ctx.ask(worker, RayTask(n=job.steps, side=job.side))).value


class RayLong(Request[int], frozen=True):
    side: str


class RayResumable(Specialist):
    """A placed task that saves a milestone, then waits until its attempt ends; resumed, it returns.

    Only a recorded milestone lets a later attempt finish it: without one the
    task starts again from nothing and waits again.
    """

    placement = Placement(resources={"special": 1})

    @handler
    async def work(self, task: RayLong) -> int:
        start = self.load_progress(int) or 0
        note(task.side, f"start-{start}")
        if start == 0:
            await self.save_progress(5)
            note(task.side, "saved")
            await anyio.sleep_forever()  # until its attempt ends
        return start


class RayResuming(Orchestrator):
    """Asks one ``RayResumable`` once."""

    async def run(self, ctx: RunContext, side: str) -> int:
        worker = await ctx.spawn(RayResumable, name="long")
        return await ctx.ask(worker, RayLong(side=side))


def expected(steps: int) -> int:
    """What an uninterrupted ``RayPipeline`` run returns."""
    return sum(n * n + n + 1 for n in range(steps))


def executions(side: str) -> list[tuple[str, int]]:
    """Every execution the side file holds: (step key, process id), in order."""
    try:
        with open(side) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    return [(key, int(pid)) for key, pid in (line.split() for line in lines)]


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:  # noqa: ASYNC109
    """Wait (bounded) until ``condition()`` holds, looking every 50 ms: another process's work."""
    with anyio.fail_after(timeout):
        while True:
            if await condition():
                return
            await anyio.sleep(0.05)


class RayLimitedTask(Request[int], frozen=True):
    n: int
    side: str
    pause: float = 0.0


class RayLimited(Specialist):
    """Takes the ``ray-shared`` limit; notes ``+ pid`` as a handler starts, ``- pid`` as it ends."""

    limit = "ray-shared"

    @handler
    async def work(self, task: RayLimitedTask) -> int:
        note(task.side, "+")
        if task.pause:
            await anyio.sleep(task.pause)  # the work takes a while: the others wait meanwhile
        note(task.side, "-")
        return task.n


class RayLimitedPipeline(Orchestrator):
    """Asks one ``RayLimited`` agent ``job.steps`` times."""

    async def run(self, ctx: RunContext, job: RayJob) -> int:
        worker = await ctx.spawn(RayLimited, name="limited")
        total = 0
        for n in range(job.steps):
            total += await ctx.ask(worker, RayLimitedTask(n=n, side=job.side, pause=job.pause))
        return total
