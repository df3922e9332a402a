"""A workflow whose code the replay tests change between runs: ``--app tests.cli.replay_app:make``.

``CHANGE`` picks the code: ``"none"`` as first deployed, ``"inserted"`` an ask
added (breaks determinism), ``"patched"`` the same ask behind ``ctx.patched``.
``Counted.started`` counts agents started (a replay must start none); ``make_on``
is a factory that must be given the store.
"""

from __future__ import annotations

import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler

CHANGE = "none"


class Line(Request[int], frozen=True):
    text: str


class Lines(msgspec.Struct):
    items: list[str] = []


class Counted(Specialist):
    __actorflow_name__ = "tests.cli.replay.Counted"
    state: Lines
    started = 0

    async def on_start(self) -> None:
        Counted.started += 1

    @handler
    async def write(self, line: Line) -> int:
        self.state.items.append(line.text)
        return len(self.state.items)


class Deployed(Orchestrator):
    __actorflow_name__ = "tests.cli.replay.Deployed"

    async def run(self, ctx: RunContext, text: str) -> list[int]:
        scribe = await ctx.spawn(Counted, name="scribe")
        out = [await ctx.ask(scribe, Line(text))]
        if CHANGE == "inserted" or (CHANGE == "patched" and ctx.patched("second-line")):
            out.append(await ctx.ask(scribe, Line("inserted")))
        out.append(await ctx.ask(scribe, Line("last")))
        return out


def make(store: str | None = None) -> Runtime:
    return Runtime(store=store)


given_stores: list[str] = []
"""The stores :func:`make_on` was given, in order."""


def make_on(store: str) -> Runtime:
    """An app factory that needs the store: ``--app tests.cli.replay_app:make_on``."""
    given_stores.append(store)
    return Runtime(store=store)
