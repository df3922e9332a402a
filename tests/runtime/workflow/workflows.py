"""The issue's example workflow, shared by the workflow tests and the crash child."""

from __future__ import annotations

import msgspec

from actorflow import Evaluator, Orchestrator, Request, RunContext, Specialist, handler, phase


class Question(Request["Finding"], frozen=True):
    text: str


class Finding(msgspec.Struct, frozen=True):
    question: str
    answer: str
    confidence: float


class Findings(Request["Verdict"], frozen=True):
    items: list[Finding]


class Verdict(msgspec.Struct, frozen=True):
    confidence: float
    feedback: str


class Report(msgspec.Struct, frozen=True):
    findings: list[Finding]
    confidence: float


class Researcher(Specialist):
    @handler
    async def research(self, q: Question) -> Finding:
        return Finding(q.text, q.text.upper(), 0.9)


class Reviewer(Evaluator):
    @handler
    async def review(self, f: Findings) -> Verdict:
        return Verdict(min(x.confidence for x in f.items), "ok")


class Lead(Orchestrator):
    @phase
    async def research(self, ctx: RunContext, questions: list[str]) -> list[Finding]:
        team = [await ctx.spawn(Researcher, name=f"researcher-{i}") for i in range(3)]
        return await ctx.gather(
            *(ctx.ask(team[i % 3], Question(q)) for i, q in enumerate(questions))
        )

    @phase
    async def review(self, ctx: RunContext, findings: list[Finding]) -> Verdict:
        reviewer = await ctx.spawn(Reviewer, name="reviewer")
        verdict: Verdict = await ctx.ask(reviewer, Findings(findings))
        await ctx.decide(
            "accept" if verdict.confidence >= 0.75 else "revise",
            rationale=verdict.feedback,
            confidence=verdict.confidence,
            alternatives=["revise", "request_human_review"],
        )
        return verdict

    async def run(self, ctx: RunContext, goal: str) -> Report:
        findings = await self.research(ctx, goal.split(";"))
        verdict = await self.review(ctx, findings)
        return Report(findings, verdict.confidence)


# --- a longer workflow for recovery tests ----------------------------------------
#
# Specialists append every execution to EXECUTIONS (in-process tests) so tests
# can check that no step with a record ran again. GATE lets a test stop the
# world at a chosen execution.

EXECUTIONS: list[str] = []


class Task(Request["Analysis"], frozen=True):
    area: str
    strict: bool = False


class Analysis(msgspec.Struct, frozen=True):
    area: str
    score: float
    strict: bool


class Score(msgspec.Struct, frozen=True):
    confidence: float
    weak: list[str]


class Scores(Request["Score"], frozen=True):
    items: list[Analysis]
    round: int


class Done(msgspec.Struct):
    count: int = 0


class Analyst(Specialist):
    state: Done

    @handler
    async def analyse(self, task: Task) -> Analysis:
        step = self.step
        EXECUTIONS.append(step.key if step else f"{self.name}:{task.area}:{task.strict}")
        self.state.count += 1
        score = (len(task.area) % 5) / 5 + (0.5 if task.strict else 0.0)
        self.report(api_calls=1, tokens=10 * len(task.area))
        return Analysis(task.area, min(score, 1.0), task.strict)


class Judge(Evaluator):
    @handler
    async def judge(self, scores: Scores) -> Score:
        step = self.step
        EXECUTIONS.append(step.key if step else f"{self.name}:round{scores.round}")
        weak = [a.area for a in scores.items if a.score < 0.5]
        return Score(1.0 - len(weak) / max(len(scores.items), 1), weak)


class Summary(msgspec.Struct, frozen=True):
    analyses: list[Analysis]
    confidence: float
    rounds: int
    pick: float
    decisions: int


class Pipeline(Orchestrator):
    """Four phases, fan-out to four analysts, an evaluator loop calling a phase again."""

    @phase
    async def plan(self, ctx: RunContext, areas: list[str]) -> list[str]:
        await ctx.decide("plan", rationale=f"{len(areas)} areas", confidence=1.0)
        return sorted(areas)

    @phase
    async def analyse(self, ctx: RunContext, areas: list[str], strict: bool) -> list[Analysis]:
        team = [await ctx.spawn(Analyst, name=f"analyst-{i}") for i in range(4)]
        return await ctx.gather(
            *(ctx.ask(team[i % 4], Task(a, strict)) for i, a in enumerate(areas))
        )

    @phase
    async def evaluate(self, ctx: RunContext, analyses: list[Analysis], round: int) -> Score:
        judge = await ctx.spawn(Judge, name="judge")
        score: Score = await ctx.ask(judge, Scores(analyses, round))
        await ctx.decide(
            "accept" if not score.weak else "reanalyse",
            rationale=f"weak: {score.weak}",
            confidence=score.confidence,
            alternatives=["accept", "reanalyse"],
        )
        return score

    @phase
    async def report(self, ctx: RunContext, analyses: list[Analysis]) -> float:
        return sum(a.score for a in analyses) / max(len(analyses), 1)

    async def run(self, ctx: RunContext, areas: list[str]) -> Summary:
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
        mean = await self.report(ctx, analyses)
        return Summary(analyses, score.confidence, rounds, pick if mean >= 0 else 0.0, rounds)


AREAS = ["io", "json", "asyncio", "email", "http", "xml", "ctypes", "unittest"]
