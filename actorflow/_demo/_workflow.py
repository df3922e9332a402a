"""The demo workflow: a code-review team over a source tree.

Phases: ``discover`` (a scout lists the files, the lead plans batches),
``analyse`` (batches fan out to several reviewers), ``evaluate`` (an evaluator
scores every area; low confidence leads to a recorded decision to re-review the
area with a stricter reviewer), ``report`` (a writer stores the JSON report).
Every agent call goes through the run context, so a killed run recovers
without reviewing again any batch whose result reached the log.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Final

import anyio
import msgspec

from actorflow._demo import _analysis as analysis
from actorflow._demo._analysis import AreaScore, FileReport
from actorflow.agents import Evaluator, Orchestrator, Specialist, phase
from actorflow.cli.progress import progress
from actorflow.runtime import Request, RunContext, handler, report

# Files that a test can read to see which files really were analysed, and when.
TRACE_ENV: Final = "ACTORFLOW_DEMO_TRACE"
STALL_ENV: Final = "ACTORFLOW_DEMO_STALL_AFTER"
STALLED_LINE: Final = b"actorflow-demo: reviewers stalled\n"
"""Test hook: once this many files were reviewed, reviewers never answer again,
so a test can signal the demo mid-run without racing its end."""

__all__ = [
    "WORKFLOW",
    "Plan",
    "ReviewInput",
    "ReviewSummary",
    "ReviewTeam",
]


class ReviewInput(msgspec.Struct, frozen=True, kw_only=True):
    """What to review and where the report goes."""

    root: str
    report_path: str
    reviewers: int = 4
    batch_size: int = 16
    threshold: float = 0.5


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """The lead's plan: every file, in batches, per area."""

    files: int
    areas: dict[str, int]
    batches: list[list[str]]


class BatchReviewed(msgspec.Struct, frozen=True):
    """A reviewer's reports on one batch."""

    reports: list[FileReport]


class ReviewBatch(Request[BatchReviewed], frozen=True):
    """Review these files (relative to ``root``)."""

    root: str
    paths: list[str]


class Discover(Request[list[str]], frozen=True):
    """List the Python files under ``root``."""

    root: str


class ScoreArea(Request[AreaScore], frozen=True):
    """Score one area from its files' reports."""

    area: str
    reports: list[FileReport]


class WriteReport(Request[str], frozen=True):
    """Write the report (JSON bytes) to ``path``; idempotent: it replaces the file."""

    path: str
    body: bytes


class ReviewSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The run's result: totals, every area's score, where the JSON report is."""

    root: str
    files: int
    unparsable: int
    lines: int
    functions: int
    classes: int
    risky_calls: int
    missing_docstrings: int
    reanalysed: list[str]
    areas: list[AreaScore]
    report_path: str


class ReviewerState(msgspec.Struct):
    """What one reviewer has done so far."""

    batches: int = 0
    files: int = 0
    risky_calls: int = 0


class EvaluatorState(msgspec.Struct):
    """Areas scored so far and the lowest confidence seen."""

    scored: int = 0
    lowest: float = 1.0


_reviewed_here = 0


def _trace(paths: list[str], strict: bool) -> None:
    target = os.environ.get(TRACE_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.writelines(f"{'strict' if strict else 'review'} {p}\n" for p in paths)


async def _maybe_stall(count: int) -> None:
    global _reviewed_here
    _reviewed_here += count
    stall = os.environ.get(STALL_ENV)
    if stall and _reviewed_here >= int(stall):
        # tell the test driving this process, which waits for this line
        os.write(2, STALLED_LINE)
        await anyio.sleep_forever()


class Scout(Specialist):
    """Lists the files to review."""

    @handler
    async def discover(self, msg: Discover) -> list[str]:
        return await anyio.to_thread.run_sync(analysis.discover, msg.root)


class Reviewer(Specialist):
    """Reviews batches of files: size, complexity, docstrings, risky calls."""

    state: ReviewerState
    strict: bool = False

    @handler
    async def review(self, msg: ReviewBatch) -> BatchReviewed:
        # ast parsing holds the GIL, but a thread keeps the event loop (and progress) live.
        work = functools.partial(analysis.analyse_files, msg.root, msg.paths, strict=self.strict)
        reports = await anyio.to_thread.run_sync(work)
        _trace(msg.paths, self.strict)
        await _maybe_stall(len(msg.paths))
        risky = sum(len(r.risky) for r in reports)
        self.state.batches += 1
        self.state.files += len(reports)
        self.state.risky_calls += risky
        report(files_reviewed=len(reports), risky_calls=risky)
        return BatchReviewed(reports)


class StrictReviewer(Reviewer):
    """The reviewer the evaluator calls on when unsure: private names, more calls, more branches."""

    strict = True


class AreaEvaluator(Evaluator):
    """Scores an area's reviews with a confidence and a rationale."""

    state: EvaluatorState

    @handler
    async def score(self, msg: ScoreArea) -> AreaScore:
        verdict = analysis.score_area(msg.area, msg.reports)
        self.state.scored += 1
        self.state.lowest = min(self.state.lowest, verdict.confidence)
        return verdict


class ReportWriter(Specialist):
    """Writes the JSON report to its file."""

    @handler
    async def write(self, msg: WriteReport) -> str:
        return await anyio.to_thread.run_sync(_write_atomically, Path(msg.path), msg.body)


def _write_atomically(path: Path, body: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(body)
    tmp.replace(path)
    return str(path.resolve())


class ReviewTeam(Orchestrator):
    """The lead: plans, fans the review out, asks for scores, decides, reports."""

    @phase
    async def discover(self, ctx: RunContext, job: ReviewInput) -> Plan:
        progress().phase("discover")
        scout = await ctx.spawn(Scout, name="scout")
        files: list[str] = await ctx.ask(scout, Discover(job.root))
        by_area = analysis.group_by_area(files)
        # Batches stay inside one area so a re-review of an area is whole batches.
        batches = [
            paths[i : i + job.batch_size]
            for paths in by_area.values()
            for i in range(0, len(paths), job.batch_size)
        ]
        await ctx.decide(
            "plan",
            description=f"review {len(files)} files in {len(by_area)} areas",
            rationale=f"{len(batches)} batches of up to {job.batch_size} files over "
            f"{job.reviewers} reviewers",
            alternatives=["one reviewer per area", "one batch per file"],
        )
        return Plan(
            files=len(files), areas={a: len(p) for a, p in by_area.items()}, batches=batches
        )

    @phase
    async def analyse(self, ctx: RunContext, job: ReviewInput, plan: Plan) -> list[FileReport]:
        display = progress()
        display.phase("analyse", total=plan.files, unit="files")
        team = [await ctx.spawn(Reviewer, name=f"reviewer-{i}") for i in range(job.reviewers)]
        reports: list[FileReport] = []
        # One round gives every reviewer a batch or two; steps are issued in a fixed
        # order each round, so a replay meets the same step ids whatever the scheduling.
        per_round = 2 * len(team)
        for start in range(0, len(plan.batches), per_round):
            batches = plan.batches[start : start + per_round]
            done = await ctx.gather(
                *(
                    ctx.ask(team[(start + i) % len(team)], ReviewBatch(job.root, b))
                    for i, b in enumerate(batches)
                )
            )
            for result in done:
                reports.extend(result.reports)
                display.advance(len(result.reports))
        return reports

    @phase
    async def evaluate(
        self, ctx: RunContext, job: ReviewInput, reports: list[FileReport]
    ) -> list[AreaScore]:
        by_area: dict[str, list[FileReport]] = {}
        for r in reports:
            by_area.setdefault(r.area, []).append(r)
        progress().phase("evaluate", total=len(by_area), unit="areas")
        evaluator = await ctx.spawn(AreaEvaluator, name="evaluator")
        scores: list[AreaScore] = await ctx.gather(
            *(ctx.ask(evaluator, ScoreArea(area, rs)) for area, rs in by_area.items())
        )
        progress().advance(len(scores))
        low = [s for s in scores if s.confidence < job.threshold]
        accepted = [s.confidence for s in scores if s.confidence >= job.threshold]
        # the decision's confidence is that of what it accepts: its least confident area
        await ctx.decide(
            "accept",
            description=f"{len(accepted)} of {len(scores)} areas accepted",
            rationale=f"each accepted area scored confidence >= {job.threshold}; "
            f"{len(low)} below it are re-reviewed strictly",
            confidence=min(accepted, default=None),
        )
        if not low:
            return scores
        progress().phase("re-review", total=len(low), unit="areas")
        strict = await ctx.spawn(StrictReviewer, name="strict-reviewer")
        final = {s.area: s for s in scores}
        for score in low:
            await ctx.decide(
                "reanalyse",
                description=f"re-review {score.area} ({score.files} files), strictly",
                rationale=score.rationale,
                confidence=score.confidence,
                alternatives=["accept as is", "flag for human review"],
            )
            paths = [r.path for r in by_area[score.area]]
            batches = [paths[i : i + job.batch_size] for i in range(0, len(paths), job.batch_size)]
            done = await ctx.gather(*(ctx.ask(strict, ReviewBatch(job.root, b)) for b in batches))
            stricter = [r for result in done for r in result.reports]
            rescored: AreaScore = await ctx.ask(evaluator, ScoreArea(score.area, stricter))
            final[score.area] = rescored
            progress().advance()
        return [final[area] for area in by_area]

    @phase
    async def report(
        self, ctx: RunContext, job: ReviewInput, reports: list[FileReport], scores: list[AreaScore]
    ) -> ReviewSummary:
        progress().phase("report")
        summary = summarise(job, reports, scores)
        writer = await ctx.spawn(ReportWriter, name="report-writer")
        body = json.dumps(msgspec.to_builtins(summary), indent=2).encode()
        path: str = await ctx.ask(writer, WriteReport(job.report_path, body))
        return msgspec.structs.replace(summary, report_path=path)

    async def run(self, ctx: RunContext, job: ReviewInput) -> ReviewSummary:
        plan = await self.discover(ctx, job)
        reports = await self.analyse(ctx, job, plan)
        scores = await self.evaluate(ctx, job, reports)
        return await self.report(ctx, job, reports, scores)


def summarise(
    job: ReviewInput, reports: list[FileReport], scores: list[AreaScore]
) -> ReviewSummary:
    """Totals over every file, areas sorted from least to most confident.

    The findings are counted from the areas' final scores, so an area re-read
    by the strict reviewer counts what it found there, as its row shows.
    """
    return ReviewSummary(
        root=job.root,
        files=len(reports),
        unparsable=sum(1 for r in reports if r.error is not None),
        lines=sum(r.lines for r in reports),
        functions=sum(r.functions for r in reports),
        classes=sum(r.classes for r in reports),
        risky_calls=sum(s.risky_calls for s in scores),
        missing_docstrings=sum(s.missing_docstrings for s in scores),
        reanalysed=sorted(s.area for s in scores if s.strict),
        areas=sorted(scores, key=lambda s: (s.confidence, s.area)),
        report_path=job.report_path,
    )


WORKFLOW: Final = ReviewTeam
"""The demo's orchestrator class, as the CLI finds it without ``--app``."""
