"""Workflows the SIGKILL crash tests run in child processes (and in-process for expectations).

Every specialist execution is passed to ``ON_EXECUTION`` (its step's
idempotency key) before any work: the crash child writes it to a side file
with ``os.write`` + fsync and prints it, so the parent knows exactly what ran
and where to kill. In-process runs leave the hook unset.

The names carry a ``Crash`` prefix: the registry finds classes by
``__qualname__``, and ``tests/runtime/workflow/workflows.py`` already defines
``Analyst``, ``Judge``...
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow import Evaluator, Orchestrator, Request, RunContext, Specialist, handler, phase

if TYPE_CHECKING:
    from collections.abc import Callable

ON_EXECUTION: Callable[[str], object] | None = None
"""Called with the step key of every specialist execution (set by the crash child);
a true result means: hold this execution forever (the parent is about to kill the process)."""

DIE = "die"
"""An area whose analysis kills its own process with SIGKILL, on every attempt."""


async def _executed(agent: Specialist, what: str) -> None:
    step = agent.step
    key = step.key if step is not None else f"{agent.name}:{what}"
    if ON_EXECUTION is not None and ON_EXECUTION(key):
        # the run must not finish before the kill lands; everything else goes on
        await anyio.sleep_forever()


def _work(area: str) -> int:
    # A little CPU and a short wait per task so a kill lands mid-run.
    total = 0
    for i in range(2000 + 300 * len(area)):
        total = (total * 31 + i) % 1_000_003
    return total


class CrashTask(Request["CrashAnalysis"], frozen=True):
    area: str
    strict: bool = False


class CrashAnalysis(msgspec.Struct, frozen=True):
    area: str
    score: float
    strict: bool
    order: int
    digest: int


class CrashScores(msgspec.Struct, frozen=True):
    items: list[CrashAnalysis]
    round: int


class CrashScore(msgspec.Struct, frozen=True):
    confidence: float
    weak: list[str]


class CrashDraft(msgspec.Struct, frozen=True):
    text: str
    words: int


class CrashSeen(msgspec.Struct):
    count: int = 0


class CrashAnalyst(Specialist):
    """Scores an area; its reply depends on its state (how many tasks it did)."""

    state: CrashSeen

    @handler
    async def analyse(self, task: CrashTask) -> CrashAnalysis:
        await _executed(self, task.area)
        if task.area == DIE:
            os.kill(os.getpid(), signal.SIGKILL)
        await anyio.sleep(0.001 * (1 + len(task.area) % 4))
        digest = _work(task.area)
        order = self.state.count
        self.state.count += 1
        score = (len(task.area) % 5) / 5 + (0.5 if task.strict else 0.0)
        return CrashAnalysis(task.area, min(score, 1.0), task.strict, order, digest)


class CrashJudge(Evaluator):
    @handler
    async def judge(self, scores: CrashScores) -> CrashScore:
        await _executed(self, f"round{scores.round}")
        await anyio.sleep(0.002)
        weak = [a.area for a in scores.items if a.score < 0.5]
        return CrashScore(1.0 - len(weak) / max(len(scores.items), 1), weak)


class CrashWriter(Specialist):
    @handler
    async def write(self, items: CrashScores) -> CrashDraft:
        await _executed(self, "draft")
        await anyio.sleep(0.002)
        text = ", ".join(f"{a.area}={a.score:.1f}" for a in items.items)
        return CrashDraft(text, len(items.items))


class CrashSummary(msgspec.Struct, frozen=True):
    analyses: list[CrashAnalysis]
    confidence: float
    rounds: int
    pick: float
    draft: CrashDraft
    mean: float


class CrashPipeline(Orchestrator):
    """Five phases, fan-out to four analysts, an evaluator loop calling a phase again."""

    @phase
    async def plan(self, ctx: RunContext, areas: list[str]) -> list[str]:
        await ctx.decide("plan", rationale=f"{len(areas)} areas", confidence=1.0)
        return sorted(areas)

    @phase
    async def analyse(self, ctx: RunContext, areas: list[str], strict: bool) -> list[CrashAnalysis]:
        team = [await ctx.spawn(CrashAnalyst, name=f"analyst-{i}") for i in range(4)]
        return await ctx.gather(
            *(ctx.ask(team[i % 4], CrashTask(a, strict)) for i, a in enumerate(areas))
        )

    @phase
    async def evaluate(
        self, ctx: RunContext, analyses: list[CrashAnalysis], round: int
    ) -> CrashScore:
        judge = await ctx.spawn(CrashJudge, name="judge")
        score = await ctx.ask(judge, CrashScores(analyses, round))
        assert isinstance(score, CrashScore)  # one message, two agents: narrow the reply
        await ctx.decide(
            "accept" if not score.weak else "reanalyse",
            rationale=f"weak: {score.weak}",
            confidence=score.confidence,
            alternatives=["accept", "reanalyse"],
        )
        return score

    @phase
    async def draft(
        self, ctx: RunContext, analyses: list[CrashAnalysis], pick: float
    ) -> CrashDraft:
        writer = await ctx.spawn(CrashWriter, name="writer")
        draft = await ctx.ask(writer, CrashScores(analyses, int(pick * 100)))
        assert isinstance(draft, CrashDraft)
        return draft

    @phase
    async def report(self, ctx: RunContext, analyses: list[CrashAnalysis]) -> float:
        return sum(a.score for a in analyses) / max(len(analyses), 1)

    async def run(self, ctx: RunContext, areas: list[str]) -> CrashSummary:
        planned = await self.plan(ctx, areas)
        analyses = await self.analyse(ctx, planned, False)
        rounds = 1
        score = await self.evaluate(ctx, analyses, rounds)
        while score.weak and rounds < 3:
            redo = await self.analyse(ctx, score.weak, True)
            by_area = {a.area: a for a in redo}
            analyses = [by_area.get(a.area, a) for a in analyses]
            rounds += 1
            score = await self.evaluate(ctx, analyses, rounds)
        pick = await ctx.random()
        draft = await self.draft(ctx, analyses, pick)
        mean = await self.report(ctx, analyses)
        return CrashSummary(analyses, score.confidence, rounds, pick, draft, mean)


class CrashApproval(Orchestrator):
    """Analyses, then waits for a human's answer, then finishes."""

    @phase
    async def analyse(self, ctx: RunContext, areas: list[str]) -> list[CrashAnalysis]:
        team = [await ctx.spawn(CrashAnalyst, name=f"analyst-{i}") for i in range(4)]
        return await ctx.gather(*(ctx.ask(team[i % 4], CrashTask(a)) for i, a in enumerate(areas)))

    @phase
    async def finish(
        self, ctx: RunContext, analyses: list[CrashAnalysis], answer: str
    ) -> CrashDraft:
        writer = await ctx.spawn(CrashWriter, name="writer")
        draft = await ctx.ask(writer, CrashScores(analyses, len(answer)))
        assert isinstance(draft, CrashDraft)
        return CrashDraft(f"{answer}: {draft.text}", draft.words)

    async def run(self, ctx: RunContext, areas: list[str]) -> CrashSummary:
        analyses = await self.analyse(ctx, areas)
        await ctx.decide("ask_human", rationale="needs approval", confidence=0.5)
        answer = await ctx.wait_for_input("approve?")
        draft = await self.finish(ctx, analyses, answer)
        pick = await ctx.random()
        return CrashSummary(analyses, 1.0, 1, pick, draft, 0.0)


AREAS = ["io", "json", "asyncio", "email", "http", "xml", "ctypes", "unittest", "csv", "zlib"]
"""The main crash workflow's input: two rounds of the evaluator loop."""

SMALL = ["io", "json", "xml", "csv"]
"""A smaller input for the 100 concurrent runs."""
