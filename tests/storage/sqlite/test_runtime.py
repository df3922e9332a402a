"""A runtime on ``store="sqlite:///..."``: runs, recovers from another runtime, closes the file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.storage import RunStatus, SqliteStore

if TYPE_CHECKING:
    from pathlib import Path


class Twice(Orchestrator):
    __actorflow_name__ = "tests.sqlite.Twice"

    async def run(self, ctx: RunContext, n: int) -> int:
        async def double(k: int) -> int:
            await ctx.now()  # a step of its own, recorded
            return k * 2

        first = await ctx.phase("first", double, n)
        return await ctx.phase("second", double, first)


async def test_a_runtime_opens_a_sqlite_url_and_its_runs_are_in_the_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(store=url) as runtime:
        assert isinstance(runtime.store, SqliteStore)
        handle = await runtime.start(Twice, 3, run_id="twice")
        assert await handle.result() == 12
    async with SqliteStore(tmp_path / "runs.db") as store:
        manifest = await store.read_run("twice")
        assert manifest.status is RunStatus.COMPLETED
        assert len(await store.read_log("twice")) > 0
        assert await store.list_unfinished() == []
    async with Runtime(store=url) as runtime:
        assert await runtime.result("twice") == 12
