"""Workflows whose runs the inspector's tests read: agents, phases, decisions, hostile text."""

from __future__ import annotations

import msgspec

from actorflow import (
    Orchestrator,
    Queue,
    Request,
    RunContext,
    Runtime,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import StepFailedError

SCRIPT = "<script>window.__pwned = 1</script>"
ATTRIBUTE = '" onload="window.__pwned=1" x="'
MARKUP = "[bold red]rich[/] <b>bold</b> &amp; {{ jinja }}"
HOSTILE = f"{SCRIPT}{ATTRIBUTE}{MARKUP}"
BIG = "x" * 1_000_000
"""A string of a megabyte: shown cut, with the rest counted."""


class Notes(msgspec.Struct):
    seen: list[str] = []
    remark: str = ""


class Research(Request[str], frozen=True):
    topic: str


class Boom(Request[str], frozen=True):
    why: str


class Researcher(Specialist):
    state: Notes

    @handler
    async def research(self, q: Research) -> str:
        self.state.seen.append(q.topic)
        self.state.remark = q.topic
        return f"found {q.topic}"

    @handler
    async def boom(self, q: Boom) -> str:
        raise ValueError(q.why)


class Team(Orchestrator):
    """Two phases over two researchers, a decision, a failed step it survives."""

    @phase
    async def gather(self, ctx: RunContext, topics: list[str]) -> list[str]:
        team = [await ctx.spawn(Researcher, name=f"researcher-{i}") for i in range(2)]
        return list(
            await ctx.gather(*(ctx.ask(team[i % 2], Research(t)) for i, t in enumerate(topics)))
        )

    @phase
    async def review(self, ctx: RunContext, found: list[str]) -> str:
        critic = await ctx.spawn(Researcher, name="critic")
        try:
            await ctx.ask(critic, Boom(found[0][:200]))
        except StepFailedError:
            pass
        await ctx.decide(
            "accept",
            rationale=f"because {found[0]}",
            confidence=0.75,
            alternatives=[found[-1], "revise"],
        )
        return found[0]

    async def run(self, ctx: RunContext, topics: list[str]) -> str:
        found = await self.gather(ctx, topics)
        ctx.checkpoint("after gather")
        return await self.review(ctx, found)


QUEUES = (Queue("reviews", max_concurrent=2), Queue("reports", per_minute=30))
"""The queues the screenshots' runs are submitted to."""


def make_runtime(store: str) -> Runtime:
    """The runtime the screenshots' inspector loads with ``--app``: fork_flow's classes, queues."""
    import tests.runtime.workflow.fork_flow  # noqa: F401  # its classes, for the fork page

    return Runtime(store=store, queues=QUEUES)
