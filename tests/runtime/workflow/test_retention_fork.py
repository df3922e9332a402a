"""A finished run can be forked from the end of any phase under the default retention.

The default keeps the newest 5 checkpoints of a finished run and, beside them,
the end of every phase (while the run is younger than ``max_age``; there is
none by default). ``actorflow checkpoints`` says which ones fork can use, and
forking from the oldest phase end of a long run, after a store-wide prune
collected what no kept checkpoint needs, runs the rest of the run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import msgspec

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.runtime.reading import checkpoint_rows
from actorflow.storage import FileStore, RetentionPolicy

if TYPE_CHECKING:
    from pathlib import Path

CHAPTERS = 8  # more phases than the default keeps checkpoints


class Page(Request[int], frozen=True):
    text: str


class Book(msgspec.Struct):
    pages: list[str] = []


class Writer(Specialist):
    __actorflow_name__ = "tests.retention_fork.Writer"
    state: Book

    @handler
    async def write(self, page: Page) -> int:
        self.state.pages.append(page.text)
        return len(self.state.pages)


class Novel(Orchestrator):
    __actorflow_name__ = "tests.retention_fork.Novel"
    written: ClassVar[list[int]] = []

    @phase
    async def chapter(self, ctx: RunContext, n: int) -> int:
        Novel.written.append(n)
        writer = await ctx.spawn(Writer, name="writer")
        pages: int = await ctx.ask(writer, Page(f"{n}:" + "x" * 1000))  # states grow into blobs
        return pages

    async def run(self, ctx: RunContext, chapters: int) -> int:
        pages = 0
        for n in range(chapters):
            pages = await self.chapter(ctx, n)
        return pages


async def test_a_finished_run_forks_from_its_first_phase_end_under_the_default_retention(
    tmp_path: Path,
) -> None:
    async with FileStore(tmp_path) as store:
        async with Runtime(store=store) as runtime:  # waits for the finished run's pruning
            assert await runtime.run(Novel, CHAPTERS, run_id="novel") == CHAPTERS
        await store.prune(RetentionPolicy())  # `actorflow prune`: logs cut, blobs collected
        rows = await checkpoint_rows(store, "novel")
        ends = [r for r in rows if r["trigger"] == "phase_end"]
        # the last phase's end may be the run's final checkpoint (one position, one snapshot)
        assert CHAPTERS - 1 <= len(ends) <= CHAPTERS
        assert len(rows) < CHAPTERS + 5 + 1, "the others are pruned down to the newest 5"
        assert all(r["forkable"] for r in rows)
        Novel.written.clear()
        async with Runtime(store=store) as runtime:
            first = ends[0]["snapshot_id"]
            handle = await runtime.fork("novel", first, new_run_id="from-the-start")
            assert await handle.result() == CHAPTERS
        # its past is in no log: its first snapshot was made durable, and retention,
        # dropping that one after the run, made the newest durable first
        forked = await store.list_snapshots("from-the-start")
        assert not forked[0].snapshot_id.startswith("0000-fork-of-")
        assert forked[-1].durable
        assert not forked[0].durable
        assert Novel.written == list(range(1, CHAPTERS)), "chapter 0 came from the checkpoint"


async def test_a_forks_first_snapshot_is_made_durable(tmp_path: Path) -> None:
    """The fork's past is in no log, only in that snapshot; the run's own need no sync."""
    async with FileStore(tmp_path) as store:
        async with Runtime(store=store, config=RuntimeConfig(retention=None)) as runtime:
            await runtime.run(Novel, 2, run_id="short")
            ends = [s for s in await store.list_snapshots("short") if s.trigger == "phase_end"]
            handle = await runtime.fork("short", ends[0].snapshot_id, new_run_id="forked")
            assert await handle.result() == 2
        forked = await store.list_snapshots("forked")
        assert forked[0].snapshot_id.startswith("0000-fork-of-")
        assert forked[0].durable
        assert not any(s.durable for s in forked[1:])
