"""The demo workflow run in-process, on both event loops, against the pure analysis."""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING

from actorflow._demo import _analysis as analysis
from actorflow._demo._workflow import ReviewInput, ReviewSummary, ReviewTeam, summarise
from actorflow.cli._progress import ProgressSink, use_progress
from actorflow.runtime import Runtime
from actorflow.storage import DecisionRecord, FileStore, MemoryStore

if TYPE_CHECKING:
    from pathlib import Path


def make_tree(root: Path) -> None:
    """Three areas: a clean package, a risky one, and one with a file that does not parse."""
    files = {
        "clean/__init__.py": '"""Clean."""\n',
        "clean/maths.py": '"""Maths."""\n\n\ndef add(a, b):\n    """Add."""\n    return a + b\n',
        "risky/__init__.py": '"""Risky."""\n',
        "risky/run.py": textwrap.dedent(
            """\
            import os, pickle, subprocess

            def go(cmd, blob):
                os.system(cmd)
                subprocess.run(cmd, shell=True)
                eval(cmd)
                return pickle.loads(blob)
            """
        ),
        "broken/bad.py": "def nope(:\n",
        "broken/ok.py": '"""Fine."""\n',
        "top.py": '"""Top."""\nx = 1\n',
    }
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


class Recorder(ProgressSink):
    """Remembers what the workflow reported."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.units: dict[str, str] = {}
        self.files = 0

    def phase(self, name: str, total: int | None = None, unit: str = "") -> None:
        self.phases.append(name)
        self.units[name] = unit

    def advance(self, count: int = 1) -> None:
        if self.phases[-1] == "analyse":
            self.files += count


def expected_summary(job: ReviewInput) -> ReviewSummary:
    files = analysis.discover(job.root)
    reports = analysis.analyse_files(job.root, files)
    scores = [
        analysis.score_area(area, [r for r in reports if r.area == area])
        for area in analysis.group_by_area(files)
    ]
    return summarise(job, reports, scores)


async def test_the_review_matches_the_pure_analysis_and_writes_its_report(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    job = ReviewInput(
        root=str(tmp_path / "tree"), report_path=str(tmp_path / "report.json"), batch_size=2
    )
    sink = Recorder()
    with use_progress(sink):
        async with Runtime(store=MemoryStore()) as runtime:
            summary: ReviewSummary = await runtime.run(ReviewTeam, job)
    plain = expected_summary(job)
    assert (summary.files, summary.lines, summary.functions) == (
        plain.files,
        plain.lines,
        plain.functions,
    )
    assert summary.files == 7
    assert summary.unparsable == 1
    assert summary.risky_calls == 4
    assert sink.phases[:3] == ["discover", "analyse", "evaluate"]
    assert sink.phases[-1] == "report"
    assert sink.files == 7
    assert sink.units["analyse"] == "files"
    assert sink.units["evaluate"] == "areas"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["files"] == 7
    assert summary.report_path == str((tmp_path / "report.json").resolve())


async def test_low_confidence_areas_get_a_decision_and_a_strict_review(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    job = ReviewInput(root=str(tmp_path / "tree"), report_path=str(tmp_path / "r.json"))
    store = FileStore(tmp_path / "store")
    async with Runtime(store=store) as runtime:
        summary: ReviewSummary = await runtime.run(ReviewTeam, job, run_id="review")
        log = await store.read_log("review")
    by_area = {s.area: s for s in summary.areas}
    assert by_area["clean"].confidence == 1.0
    assert not by_area["clean"].strict
    assert by_area["risky"].strict
    assert by_area["risky"].confidence < job.threshold
    assert "risky" in summary.reanalysed
    decisions = [r for r in log if isinstance(r, DecisionRecord)]
    assert [d.type for d in decisions][:2] == ["plan", "accept"]
    reanalysed = [d for d in decisions if d.type == "reanalyse"]
    assert {d.description.split()[1] for d in reanalysed} == set(summary.reanalysed)
    assert all(d.rationale and d.confidence is not None for d in reanalysed)
    # the accept decision's confidence is that of what it accepted, as its rationale says
    [accept] = [d for d in decisions if d.type == "accept"]
    assert accept.confidence is not None
    assert accept.confidence >= job.threshold
    assert f"{job.threshold}" in accept.rationale


async def test_the_totals_agree_with_the_rows_after_a_strict_re_review(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    # a call only the strict reviewer flags, in the area it re-reads
    (tmp_path / "tree" / "risky" / "more.py").write_text(
        '"""More."""\n\n\ndef build(code):\n    """Build."""\n'
        '    return compile(code, "x", "exec")\n'
    )
    job = ReviewInput(root=str(tmp_path / "tree"), report_path=str(tmp_path / "r.json"))
    async with Runtime(store=MemoryStore()) as runtime:
        summary: ReviewSummary = await runtime.run(ReviewTeam, job)
    assert summary.reanalysed  # the strict reviewer found more in what it re-read
    assert summary.risky_calls == sum(s.risky_calls for s in summary.areas)
    assert summary.missing_docstrings == sum(s.missing_docstrings for s in summary.areas)
    assert summary.files == sum(s.files for s in summary.areas)


async def test_a_completed_runs_last_checkpoint_lists_no_agent_as_running(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    job = ReviewInput(root=str(tmp_path / "tree"), report_path=str(tmp_path / "r.json"))
    store = FileStore(tmp_path / "store")
    async with Runtime(store=store) as runtime:
        await runtime.run(ReviewTeam, job, run_id="review")
        [*_, last] = await store.list_snapshots("review")
        snapshot = await store.read_snapshot("review", last.snapshot_id)
        query = await runtime.query("review")
    assert snapshot.agents
    assert {a.status for a in snapshot.agents.values()} == {"stopped"}
    assert {a.status for a in query.agents.values()} == {"stopped"}
