"""A workflow whose every user-visible string is hostile Rich markup, for the CLI's tests.

Use it as the CLI's app: ``--app tests.cli.hostile_app:make_runtime``.
"""

from __future__ import annotations

import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler

HOSTILE = "[bold]ship it[/bold] [e0c15a95] [red] [/] :smile: [blue]yes \\"
"""Text Rich would read as markup (tags, a closing tag, an emoji code, a trailing backslash)."""


class Note(Request[str], frozen=True):
    text: str


class Echo(Specialist):
    __actorflow_name__ = "tests.cli.hostile_app.Echo"

    @handler
    async def echo(self, note: Note) -> str:
        return note.text


class Order(msgspec.Struct, frozen=True):
    """What a run is asked to do: finish (``done``), ``pause`` for input, or ``fail``."""

    mode: str = "done"


class HostileFlow(Orchestrator):
    __actorflow_name__ = "tests.cli.hostile_app.HostileFlow"

    async def gather_notes(self, ctx: RunContext) -> str:
        echo = await ctx.spawn(Echo, name="echo")
        reply: str = await ctx.ask(echo, Note(HOSTILE))
        return reply

    async def run(self, ctx: RunContext, order: Order) -> str:
        await ctx.phase(HOSTILE, self.gather_notes, ctx, result_type=str)
        await ctx.decide(
            HOSTILE,
            description=HOSTILE,
            rationale=HOSTILE,
            confidence=0.5,
            alternatives=[HOSTILE],
            agent=HOSTILE,
        )
        ctx.checkpoint(HOSTILE)
        if order.mode == "pause":
            answer = await ctx.wait_for_input(HOSTILE)
            return answer + HOSTILE
        if order.mode == "fail":
            raise ValueError("index [/] out of range " + HOSTILE)
        return HOSTILE


def make_runtime(store: str | None = None) -> Runtime:
    """The runtime the CLI loads with ``--app``."""
    return Runtime(store=store)
