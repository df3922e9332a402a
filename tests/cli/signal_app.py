"""A workflow that waits for signals and answers updates, for ``actorflow signal|update|cancel``.

The CLI loads it with ``--app tests.cli.signal_app:make_runtime``. ``Approval``
waits (paused) for an ``Approve`` signal, named by its ``__actorflow_name__``;
``Tally`` waits for ``Finish`` and answers ``Count`` updates (named by their
qualified names) while it waits.
"""

from __future__ import annotations

import msgspec

from actorflow import Orchestrator, RunContext, Runtime, update


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


def make_runtime(store: str) -> Runtime:
    """The runtime the CLI loads with ``--app``."""
    return Runtime(store=store)
