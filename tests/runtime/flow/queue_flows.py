"""Workflows of the queue tests: each run audits its entry and exit in a shared list."""

from __future__ import annotations

import anyio.lowlevel

from actorflow import Orchestrator, RunContext

AUDIT: list[tuple[str, str, int]] = []
"""``("enter" | "exit", run id, priority)`` in the order runs did them (one process)."""


class Audited(Orchestrator):
    __actorflow_name__ = "tests.flow.Audited"

    async def run(self, ctx: RunContext, priority: int) -> int:
        AUDIT.append(("enter", ctx.run_id, priority))
        await anyio.lowlevel.checkpoint()  # let a run beside it enter, if any may
        AUDIT.append(("exit", ctx.run_id, priority))
        return priority


STARTS: list[tuple[str, float]] = []
"""``(run id, the test clock's time)`` as each ``Clocked`` run started."""


class Clocked(Orchestrator):
    __actorflow_name__ = "tests.flow.Clocked"

    async def run(self, ctx: RunContext, n: int) -> int:
        from tests.runtime.flow.test_queues import CLOCK  # the test's fake clock

        STARTS.append((ctx.run_id, CLOCK.now()))
        return n
