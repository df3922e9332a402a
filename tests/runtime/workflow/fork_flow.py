"""A workflow whose result shows its agent's state: what fork-with-edit and compare run.

``Ledger`` has two phases; in each, the ``clerk`` agent adds an entry to its
``Book`` and replies with every entry so far, prefixed by the book's
``prefix``, and the run decides on the way. A fork from the end of the first
phase with the clerk's book edited finishes with a result that shows the
edit. The CLI loads it with ``--app tests.runtime.workflow.fork_flow:make_runtime``.
"""

from __future__ import annotations

import msgspec

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    Specialist,
    handler,
    phase,
)


class Entry(Request[list[str]], frozen=True):
    text: str


class Book(msgspec.Struct):
    entries: list[str] = []
    prefix: str = ""
    pages: int = 0


class Clerk(Specialist):
    __actorflow_name__ = "tests.fork_flow.Clerk"
    state: Book

    @handler
    async def add(self, entry: Entry) -> list[str]:
        self.state.entries.append(self.state.prefix + entry.text)
        self.state.pages += 1
        return list(self.state.entries)


class Ledger(Orchestrator):
    __actorflow_name__ = "tests.fork_flow.Ledger"

    @phase
    async def open(self, ctx: RunContext, text: str) -> list[str]:
        clerk = await ctx.spawn(Clerk, name="clerk")
        entries: list[str] = await ctx.ask(clerk, Entry(text))
        return entries

    @phase
    async def close(self, ctx: RunContext, text: str) -> list[str]:
        clerk = await ctx.spawn(Clerk, name="clerk")
        entries: list[str] = await ctx.ask(clerk, Entry(text))
        await ctx.decide("close", description=f"{len(entries)} entries", rationale="done")
        return entries

    async def run(self, ctx: RunContext, text: str) -> list[str]:
        await self.open(ctx, text)
        return await self.close(ctx, text.upper())


def make_runtime(store: str) -> Runtime:
    """The runtime the CLI loads with ``--app``."""
    return Runtime(store=store)
