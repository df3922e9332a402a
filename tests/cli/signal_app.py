"""Workflows the CLI drives in tests: signals, updates, phases, long results.

The CLI loads them with ``--app tests.cli.signal_app:make_runtime``. ``Approval``
waits (paused) for an ``Approve`` signal, named by its ``__actorflow_name__``;
``Tally`` waits for ``Finish`` and answers ``Count`` updates (named by their
qualified names) while it waits; ``Essay`` goes through two phases and returns
a long string.
"""

from __future__ import annotations

import msgspec

from actorflow import Orchestrator, RunContext, Runtime, phase, update


class Approve(msgspec.Struct, frozen=True):
    __actorflow_name__ = "tests.cli.Approve"
    by: str
    level: int


class SignalAppFinish(msgspec.Struct, frozen=True):
    pass


class SignalAppCount(msgspec.Struct, frozen=True):
    item: str


class Approval(Orchestrator):
    __actorflow_name__ = "tests.cli.Approval"

    async def run(self, ctx: RunContext, _: None) -> str:
        approve = await ctx.wait_for(Approve, pause=True)
        return f"{approve.by}:{approve.level}"


class Tally(Orchestrator):
    __actorflow_name__ = "tests.cli.Tally"
    items: list[str]

    @update
    async def count(self, ctx: RunContext, message: SignalAppCount) -> int:
        self.items.append(message.item)
        return len(self.items)

    async def run(self, ctx: RunContext, _: None) -> list[str]:
        self.items = []
        await ctx.wait_for(SignalAppFinish)
        return self.items


class Essay(Orchestrator):
    __actorflow_name__ = "tests.cli.Essay"

    @phase
    async def draft(self, ctx: RunContext, words: int) -> list[str]:
        return [f"word{i}" for i in range(words)]

    @phase
    async def polish(self, ctx: RunContext, words: list[str]) -> str:
        await ctx.now()
        return " ".join(words)

    async def run(self, ctx: RunContext, words: int) -> str:
        return await self.polish(ctx, await self.draft(ctx, words))


def make_runtime(store: str) -> Runtime:
    """The runtime the CLI loads with ``--app``."""
    return Runtime(store=store)
