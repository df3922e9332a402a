"""The CLI on a store a real workflow wrote, every visible string hostile Rich markup.

Nothing from a user's data or an exception may be read as markup: results,
errors, prompts, decisions, agent names, phases and triggers print exactly as
they are, and the commands that drive runs report each outcome with its exit code.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.errors import RunFailedError, RunPaused
from actorflow.runtime import RuntimeConfig
from actorflow.storage import FileStore, RunStatus
from tests.cli.hostile_app import HOSTILE, HostileFlow, Order, make_runtime

ROOT = Path(__file__).resolve().parents[2]
APP = ["--app", "tests.cli.hostile_app:make_runtime"]
FLOW = "tests.cli.hostile_app.HostileFlow"
runner = CliRunner()


async def _prepare(path: str) -> None:
    """Runs ``done``, ``pause`` (waiting for input), ``fail``; ``orphan``: done, then crashed."""
    runtime = make_runtime(path)
    runtime.config = RuntimeConfig(code_version="v-[red]7")
    async with runtime as rt:
        for run_id in ("done", "orphan"):
            await rt.run(HostileFlow, Order("done"), run_id=run_id)
        with pytest.raises(RunPaused):
            await rt.run(HostileFlow, Order("pause"), run_id="pause")
        with pytest.raises(RunFailedError):
            await rt.run(HostileFlow, Order("fail"), run_id="fail")
    store = FileStore(path)
    try:
        interrupted = RunStatus.INTERRUPTED
        await store.update_run("orphan", lambda m: msgspec.structs.replace(m, status=interrupted))
    finally:
        await store.aclose()


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    anyio.run(_prepare, path)
    return path


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "400"})


class TestNothingIsReadAsMarkup:
    def test_results_print_as_they_are(self, store: str) -> None:
        result = cli("result", "done", "--store", store)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == HOSTILE
        started = cli("start", FLOW, "--input", "{}", "--run-id", "again", "--store", store, *APP)
        assert started.exit_code == 0, started.output
        assert json.dumps(HOSTILE) in started.stdout

    def test_an_error_with_a_closing_tag_is_a_failed_run_not_a_crash(self, store: str) -> None:
        args = ("start", FLOW, "--input", '{"mode": "fail"}', "--run-id", "f2", "--store", store)
        result = cli(*args, *APP)
        assert result.exit_code == EXIT_CODES["run_failed"], result.output
        assert f"ValueError: index [/] out of range {HOSTILE}" in result.output
        failed = cli("result", "fail", "--store", store)
        assert failed.exit_code == EXIT_CODES["run_failed"]
        assert f"index [/] out of range {HOSTILE}" in failed.output

    def test_the_log_shows_decisions_phases_and_prompts(self, store: str) -> None:
        result = cli("log", "pause", "--store", store)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        # a decision outside any phase leads with its type, then who made it
        assert any(line.split()[1:2] == ["decision"] for line in lines)
        assert f"decision {HOSTILE} by {HOSTILE} (step 0)" in result.output
        assert f"rationale: {HOSTILE}" in result.output
        assert f"       {HOSTILE}" in lines  # the description
        assert f"phase end {HOSTILE}.0: " in result.output
        assert f"-> echo: {json.dumps(HOSTILE)[:57]}" in result.output
        assert f"event input_requested 1: {HOSTILE}" in result.output

    def test_tables_show_phases_prompts_and_triggers(self, store: str) -> None:
        runs = cli("runs", "--store", store, "--status", "paused")
        assert runs.exit_code == 0, runs.output
        assert runs.output.count(HOSTILE) == 2  # its phase and its prompt
        checkpoints = cli("checkpoints", "done", "--store", store)
        rows = json.loads(cli("checkpoints", "done", "--store", store, "--json").stdout)
        for row in rows:
            assert row["trigger"] in checkpoints.output
        assert HOSTILE in checkpoints.output

    def test_the_diff_shows_decisions_and_phases(self, store: str) -> None:
        # from the first checkpoint: how many follow it depends on which the
        # run's final snapshot superseded while they were queued
        first = json.loads(cli("checkpoints", "done", "--store", store, "--json").stdout)[0]
        result = cli("diff", "done", first["snapshot_id"], "latest", "--store", store)
        assert result.exit_code == 0, result.output
        # the phase's name labels the checkpoints (the first is its end: a run's
        # first phase takes no start checkpoint at position 0)
        assert re.search(rf"\(position \d+, {re.escape(HOSTILE)}\)", result.output)
        assert f"decision {HOSTILE} by {HOSTILE} (confidence 0.50): {HOSTILE}" in result.output


class TestPausedRuns:
    """Every command says the same of a run that pauses, and exits 6."""

    def said_paused(self, result: Result, run_id: str) -> None:
        assert result.exit_code == EXIT_CODES["paused"], result.output
        assert f"paused {run_id}: waiting for input: {HOSTILE}\n" in result.output
        assert f"resume {run_id} --response TEXT" in result.output
        assert "error:" not in result.output

    def test_start_recover_fork_and_result(self, store: str) -> None:
        order = '{"mode": "pause"}'
        started = cli("start", FLOW, "--input", order, "--run-id", "p2", "--store", store, *APP)
        self.said_paused(started, "p2")
        self.said_paused(cli("recover", "pause", "--store", store, *APP), "pause")
        forked = cli("fork", "pause", "latest", "--store", store, *APP, "--json")
        assert forked.exit_code == EXIT_CODES["paused"], forked.output
        assert json.loads(forked.stdout)["prompt"] == HOSTILE
        result = cli("result", "pause", "--store", store)
        self.said_paused(result, "pause")
        assert json.loads(result.stdout)["prompt"] == HOSTILE

    def test_resume_answers_with_hostile_text(self, store: str) -> None:
        result = cli("resume", "pause", "--response", "[/]", "--store", store, *APP)
        assert result.exit_code == 0, result.output
        assert json.dumps("[/]" + HOSTILE) in result.output
        assert "resumed pause: completed; restored checkpoint" in result.output


class TestStartAndResult:
    def test_a_bad_input_is_bad_usage(self, store: str) -> None:
        result = cli("start", FLOW, "--input", '{"mode": 3}', "--store", store, *APP)
        assert result.exit_code == EXIT_CODES["usage"]
        assert "invalid value '{\"mode\": 3}' for --input" in result.output
        assert "Expected `str`, got `int` - at `$.mode`" in result.output
        not_json = cli("start", FLOW, "--input", "{", "--store", store, *APP)
        assert not_json.exit_code == EXIT_CODES["usage"]

    def test_an_unknown_workflow_says_to_import_it(self, store: str) -> None:
        result = cli("start", "NoSuchFlow", "--store", store)
        assert result.exit_code == EXIT_CODES["error"]
        assert "no class with this name" in result.output

    def test_result_of_a_run_that_has_not_finished_exits_8(self, store: str) -> None:
        result = cli("result", "orphan", "--store", store)
        assert result.exit_code == EXIT_CODES["not_finished"]
        assert json.loads(result.stdout)["status"] == "interrupted"
        assert cli("result", "nope", "--store", store).exit_code == EXIT_CODES["not_found"]

    def test_detach_returns_once_the_run_is_recorded(self, store: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"}
        run = [sys.executable, "-m", "actorflow"]
        args = ["start", FLOW, "--input", "{}", "--run-id", "bg", "--detach", "--store", store]
        started = subprocess.run(
            [*run, *args, *APP], capture_output=True, text=True, timeout=120, env=env, check=False
        )
        assert started.returncode == 0, started.stderr
        assert "started bg in the background" in started.stdout
        # the background process finishes it: follow its log to the end
        follow = [*run, "log", "bg", "--follow", "--store", store]
        subprocess.run(follow, capture_output=True, timeout=120, env=env, check=True)
        assert json.loads(cli("result", "bg", "--store", store).stdout) == HOSTILE


class TestRecoveryReport:
    def test_recover_says_what_came_from_the_checkpoint(self, store: str) -> None:
        result = cli("recover", "orphan", "--store", store, *APP)
        assert result.exit_code == 0, result.output
        line = next(x for x in result.output.splitlines() if x.startswith("recovered orphan"))
        assert line.startswith("recovered orphan: completed; restored checkpoint ")
        assert "and replayed 0 recorded step(s) logged after it" in line
        data = json.loads(cli("recover", "--store", store, *APP, "--json").stdout)
        assert data == {"recovered": [], "not_finished": []}


class TestSmallerOnes:
    def test_runs_json_has_the_code_version(self, store: str) -> None:
        rows = json.loads(cli("runs", "--store", store, "--json").stdout)
        assert {r["code_version"] for r in rows} == {"v-[red]7"}

    def test_log_follow_stops_when_the_run_pauses(self, store: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "actorflow", "log", "pause", "--follow", "--store", store]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "input_requested" in proc.stdout
