"""A workflow in no ``RayCluster(imports=...)``: hosts import it by the module its run recorded."""

from __future__ import annotations

from actorflow import Orchestrator, RunContext


class RayUnshipped(Orchestrator):
    """Returns its input doubled."""

    async def run(self, ctx: RunContext, n: int) -> int:
        return 2 * n
