"""A workflow the test hosts do not import at first (not in ``RayCluster(imports=...)``)."""

from __future__ import annotations

from actorflow import Orchestrator, RunContext


class RayUnshipped(Orchestrator):
    """Returns its input doubled."""

    async def run(self, ctx: RunContext, n: int) -> int:
        return 2 * n
