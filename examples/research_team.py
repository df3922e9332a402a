"""A research team with an evaluator loop: draft, critique, revise until confident.

The ``draft`` and ``critique`` phases are called again each round; every call is
its own memoised phase occurrence, so a crash in round 3 replays rounds 1 and 2
from the log and continues. Each round's verdict is a recorded decision.

Run it with ``python examples/research_team.py [STORE]``: once on asyncio, once on trio.
"""

from __future__ import annotations

import sys
import tempfile

import anyio
import msgspec

from actorflow import (
    Evaluator,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    Specialist,
    handler,
    phase,
)

THRESHOLD = 0.8
MAX_ROUNDS = 5


class Brief(Request["Article"], frozen=True):
    topic: str
    round: int
    feedback: str


class Article(Request["Critique"], frozen=True):
    topic: str
    sections: list[str]
    round: int


class Critique(msgspec.Struct, frozen=True):
    confidence: float
    feedback: str


class Report(msgspec.Struct, frozen=True):
    article: Article
    confidence: float
    rounds: int


class WriterNotes(msgspec.Struct):
    drafts: int = 0


class Writer(Specialist):
    """Writes a draft; each round adds the section the critic asked for."""

    state: WriterNotes

    @handler
    async def write(self, brief: Brief) -> Article:
        self.state.drafts += 1
        sections = [f"{brief.topic}: overview"]
        sections += [f"{brief.topic}: {part}" for part in brief.feedback.split(";") if part]
        return Article(brief.topic, sections, brief.round)


class Critic(Evaluator):
    """Scores a draft by how many of the expected sections it covers."""

    expected = ("overview", "evidence", "counterpoints", "summary")

    @handler
    async def critique(self, article: Article) -> Critique:
        covered = [e for e in self.expected if any(s.endswith(e) for s in article.sections)]
        missing = [e for e in self.expected if e not in covered]
        return Critique(len(covered) / len(self.expected), ";".join(covered[1:] + missing[:1]))


class Editor(Orchestrator):
    """Drafts and critiques in rounds until the critic is confident enough."""

    @phase
    async def draft(self, ctx: RunContext, brief: Brief) -> Article:
        writer = await ctx.spawn(Writer, name="writer")
        article: Article = await ctx.ask(writer, brief)
        return article

    @phase
    async def critique(self, ctx: RunContext, article: Article) -> Critique:
        critic = await ctx.spawn(Critic, name="critic")
        verdict: Critique = await ctx.ask(critic, article)
        return verdict

    async def run(self, ctx: RunContext, topic: str) -> Report:
        feedback = ""
        for round_no in range(1, MAX_ROUNDS + 1):
            article = await self.draft(ctx, Brief(topic, round_no, feedback))
            verdict = await self.critique(ctx, article)
            done = verdict.confidence >= THRESHOLD or round_no == MAX_ROUNDS
            await ctx.decide(
                "accept" if done else "revise",
                description=f"round {round_no}: {len(article.sections)} sections",
                rationale=f"critic asked for: {verdict.feedback or 'nothing'}",
                confidence=verdict.confidence,
                alternatives=["revise", "accept"],
            )
            if done:
                return Report(article, verdict.confidence, round_no)
            feedback = verdict.feedback
        raise AssertionError("unreachable: the last round always accepts")


async def main(store: str) -> Report:
    async with Runtime(store=store) as runtime:
        report: Report = await runtime.run(Editor, "actor models")
    return report


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="actorflow-")
    for backend in ("asyncio", "trio"):
        result = anyio.run(main, folder, backend=backend)
        print(f"{backend}: accepted after {result.rounds} round(s), confidence {result.confidence}")
        print("  " + "\n  ".join(result.article.sections))
    print(f"data in {folder}: try `actorflow log RUN --store {folder}`")
