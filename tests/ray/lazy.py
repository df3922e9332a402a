"""A placed agent whose module only the run imports (the placed actors do not, at first)."""

from __future__ import annotations

from actorflow import Orchestrator, RunContext
from actorflow.ray import Placement as _Placement
from tests.ray.app import RayJob, RayTask, RayWorker


class RayLazyPlaced(RayWorker):
    """Placed like ``RayPlacedWorker``, from a module of its own."""

    placement = _Placement(resources={"special": 1})


class RayLazyPipeline(Orchestrator):
    """Asks a ``RayLazyPlaced`` once per step."""

    async def run(self, ctx: RunContext, job: RayJob) -> int:
        worker = await ctx.spawn(RayLazyPlaced, name="worker")
        total = 0
        for n in range(job.steps):
            total += (await ctx.ask(worker, RayTask(n=n, side=job.side))).value
        return total
