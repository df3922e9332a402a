"""`actorflow demo` as a user runs it: every subcommand on its data, and kill -9 then recover."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actorflow._demo import _analysis as analysis
from actorflow._demo._workflow import STALL_ENV, STALLED_LINE, TRACE_ENV
from tests import forkserver
from tests.demo.test_workflow import make_tree
from tests.lines import Lines

TIMEOUT = 180  # seconds: a bound on a hung command, far above its run time


def actorflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "actorflow", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    proc = actorflow(*args, env=env)
    assert proc.returncode == 0, f"actorflow {args}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """One finished demo run over a small tree: (store, run id, demo output)."""
    base = tmp_path_factory.mktemp("demo")
    make_tree(base / "tree")
    store = str(base / "store")
    out = ok("demo", "--path", str(base / "tree"), "--store", store, "--run-id", "demo-1")
    return store, "demo-1", out


class TestDemoData:
    def test_demo_prints_the_summary_and_where_its_data_is(
        self, demo_store: tuple[str, str, str]
    ) -> None:
        store, run_id, out = demo_store
        assert "code review of" in out
        assert f"run {run_id} completed" in out
        assert f"data:        {Path(store).absolute()}" in out
        report = json.loads((Path(store) / "actorflow-report.json").read_text())
        assert report["files"] == 7

    def test_runs_and_checkpoints(self, demo_store: tuple[str, str, str]) -> None:
        store, run_id, _ = demo_store
        [row] = json.loads(ok("runs", "--store", store, "--json"))
        assert (row["run_id"], row["status"], row["workflow"]) == (
            run_id,
            "completed",
            "ReviewTeam",
        )
        checkpoints = json.loads(ok("checkpoints", run_id, "--store", store, "--json"))
        assert len(checkpoints) >= 2
        assert all(c["checksum"] == "ok" for c in checkpoints)

    def test_show_log_diff_validate_prune(
        self, demo_store: tuple[str, str, str], tmp_path: Path
    ) -> None:
        run_id = demo_store[1]
        store = str(tmp_path / "copy")  # prune changes it: keep the shared run intact
        shutil.copytree(demo_store[0], store)
        latest = json.loads(ok("show", run_id, "latest", "--store", store))
        reviewers = [a for a in latest["agents"] if a.startswith("reviewer-")]
        assert reviewers
        assert sum(latest["agents"][a]["state"]["files"] for a in reviewers) == 7
        log = ok("log", run_id, "--store", store)
        assert "reanalyse" in log
        assert "rationale:" in log
        first = json.loads(ok("checkpoints", run_id, "--store", store, "--json"))[0]
        diff = json.loads(
            ok("diff", run_id, first["snapshot_id"], "latest", "--store", store, "--json")
        )
        assert diff["phases_finished"]
        assert ok("validate", "--store", store).startswith("ok")
        pruned = json.loads(
            ok("prune", "--keep", "1", "--drop-phase-ends", "--store", store, "--json")
        )
        assert pruned["snapshots_deleted"] >= 1
        assert len(json.loads(ok("checkpoints", run_id, "--store", store, "--json"))) == 1


def _reviews(trace: Path) -> list[str]:
    if not trace.exists():
        return []
    return [
        line.split(" ", 1)[1]
        for line in trace.read_text().splitlines()
        if line.startswith("review ")
    ]


@pytest.mark.slow
def test_a_killed_demo_is_recovered_without_reviewing_logged_files_again(tmp_path: Path) -> None:
    root = analysis.default_root() / "idlelib"  # ~125 files: a few rounds of batches
    store = str(tmp_path / "store")
    trace = tmp_path / "trace"
    env = {TRACE_ENV: str(trace)}
    demo = _start_demo(root, store, trace, "killed")
    demo.send_signal(signal.SIGKILL)  # no cleanup at all
    demo.communicate(timeout=TIMEOUT)
    assert demo.returncode == -signal.SIGKILL, "the demo finished before it could be killed"
    before = _reviews(trace)
    [row] = json.loads(ok("runs", "--store", store, "--json"))
    assert row["status"] == "running"

    out = ok("recover", "--store", store, env=env)
    replayed = int(re.search(r"replayed (\d+) recorded step", out).group(1))  # type: ignore[union-attr]
    assert replayed > 0
    after = _reviews(trace)[len(before) :]
    files = analysis.discover(root)
    # every file reviewed, and the second process skipped what the first one logged
    assert sorted(set(before) | set(after)) == files
    assert len(after) < len(files)
    # only the round in flight at the kill runs twice: 2 batches per reviewer, 16 files each
    assert len(set(before) & set(after)) <= 2 * 2 * 16
    [row] = json.loads(ok("runs", "--store", store, "--json"))
    assert row["status"] == "completed"
    report = json.loads((Path(store) / "actorflow-report.json").read_text())
    assert report["files"] == len(files)


def _checkpoint_between_analysis_and_strict_review(store: str, run_id: str) -> str:
    """The oldest checkpoint with the analysis finished and no strict review recorded."""
    for info in json.loads(ok("checkpoints", run_id, "--store", store, "--json")):
        shown = json.loads(ok("show", run_id, info["snapshot_id"], "--store", store))
        strict = [s for s in shown["steps"] if s.get("target") == "strict-reviewer"]
        if "analyse.0" in shown["phases"] and not strict and "evaluate.0" not in shown["phases"]:
            return str(info["snapshot_id"])
    pytest.fail("no checkpoint between the analysis and the strict review")


def test_fork_resume_and_recover_on_the_demo_data(
    demo_store: tuple[str, str, str], tmp_path: Path
) -> None:
    store = str(tmp_path / "copy")
    shutil.copytree(demo_store[0], store)
    evaluate = _checkpoint_between_analysis_and_strict_review(store, "demo-1")
    trace = tmp_path / "trace"
    forked = json.loads(
        ok(
            "fork",
            "demo-1",
            evaluate,
            "--store",
            store,
            "--json",
            env={TRACE_ENV: str(trace)},
        )
    )
    assert forked["status"] == "completed"
    assert forked["result"]["files"] == 7
    # the fork started after the analysis: no file was reviewed again, only the
    # evaluation (with its strict re-review of the risky area) ran live
    assert _reviews(trace) == []
    assert "strict risky/run.py" in trace.read_text()
    [fork_row] = json.loads(ok("runs", "--store", store, "--json", "--status", "completed"))[1:]
    assert fork_row["parent"] == "demo-1"
    assert "no orphaned runs to recover" in ok("recover", "--store", store)
    not_paused = actorflow("resume", "demo-1", "--response", "yes", "--store", store)
    assert not_paused.returncode == 1
    assert "not paused" in not_paused.stderr


def _start_demo(root: Path, store: str, trace: Path, run_id: str) -> forkserver.Child:
    demo = forkserver.popen(
        [
            sys.executable,
            "-m",
            "actorflow",
            "demo",
            "--path",
            str(root),
            "--store",
            store,
            "--run-id",
            run_id,
            "--reviewers",
            "2",
        ],
        # reviewers stall after 70 files: the demo is surely mid-run when signalled
        env={**os.environ, TRACE_ENV: str(trace), STALL_ENV: "70"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the demo says when its reviewers stalled: wait for that line, bounded
    assert demo.stderr is not None
    deadline = time.monotonic() + TIMEOUT
    said = Lines(demo.stderr)
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "the demo did not reach 70 reviewed files in time"
        try:
            line = said.next(left)
        except TimeoutError:
            raise AssertionError("the demo did not reach 70 reviewed files in time") from None
        assert line is not None, "the demo ended before it stalled"
        if line + "\n" == STALLED_LINE.decode():
            return demo


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_marks_the_demo_interrupted_and_recover_finishes_it(
    tmp_path: Path, signum: signal.Signals
) -> None:
    store, trace = str(tmp_path / "store"), tmp_path / "trace"
    demo = _start_demo(analysis.default_root() / "idlelib", store, trace, "ctrl-c")
    demo.send_signal(signum)
    _, stderr = demo.communicate(timeout=TIMEOUT)
    assert demo.returncode == 130, stderr
    # the hint names the command as it was run (here `python -m actorflow`), with its store
    assert "interrupted: `" in stderr
    assert f" -m actorflow recover ctrl-c --store {store}` continues where it stopped" in stderr
    [row] = json.loads(ok("runs", "--store", store, "--json"))
    assert row["status"] == "interrupted"
    out = ok("recover", "ctrl-c", "--store", store)
    assert "recovered ctrl-c: completed" in out
    [row] = json.loads(ok("runs", "--store", store, "--json"))
    assert row["status"] == "completed"
