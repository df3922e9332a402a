"""The app itself: help, ``python -m``, one-line errors and their exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest
import typer
from typer.testing import CliRunner

from actorflow.cli import EXIT_CODES, app, exit_code_for
from actorflow.cli._app import run_command
from actorflow.cli._program import program
from actorflow.errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    ConfigurationError,
    RunFailedError,
    RunLockedError,
    RunNotFoundError,
    RunPaused,
)
from tests.cli.stored import write_orphan_of_an_unknown_workflow

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("runs", "checkpoints", "show", "log", "validate", "diff", "prune"):
        assert command in result.output


def test_help_lists_readers_then_the_commands_that_run_workflows() -> None:
    listed = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    order = ["runs", "checkpoints", "show", "diff", "validate", "log", "prune"]
    order += ["demo", "recover", "fork", "resume"]
    positions = [listed.index(f"│ {command} ") for command in order]
    assert positions == sorted(positions)


def test_python_dash_m_runs_the_same_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "actorflow", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "checkpoints" in proc.stdout


def test_a_missing_store_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(tmp_path / "nowhere")])
    assert result.exit_code == EXIT_CODES["error"]
    assert "no actorflow store at" in result.output
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(tmp_path / "nowhere"), "--debug"])
    assert result.exit_code != 0
    assert result.exception is not None
    assert "no actorflow store at" in str(result.exception)


def test_the_store_comes_from_the_environment(tmp_path: Path) -> None:
    missing = str(tmp_path / "from-env")
    result = runner.invoke(app, ["runs"], env={"ACTORFLOW_STORE": missing})
    assert missing in result.output


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (CheckpointCorruptedError("snap", "bad checksum"), "corrupt"),
        (RunNotFoundError("r"), "not_found"),
        (CheckpointNotFoundError("r", "c"), "not_found"),
        (RunFailedError("r", "ValueError", "x"), "run_failed"),
        (RunPaused("r", "ok?"), "paused"),
        (RunLockedError("r"), "locked"),
        (ConfigurationError("x", 1, "y"), "error"),
    ],
)
def test_errors_map_to_documented_exit_codes(error: Exception, code: str) -> None:
    assert exit_code_for(error) == EXIT_CODES[code]


def test_warnings_go_to_stderr_so_json_output_stays_parseable(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    anyio.run(write_orphan_of_an_unknown_workflow, store)
    proc = subprocess.run(
        [sys.executable, "-m", "actorflow", "recover", "--store", store, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == EXIT_CODES["run_failed"], proc.stderr
    # the run cannot be recovered here: the warning saying why is on stderr only
    assert "run_not_recovered" in proc.stderr
    assert json.loads(proc.stdout)["not_finished"][0]["run_id"] == "orphan"


@pytest.mark.parametrize("command", ["recover", "fork", "resume"])
def test_help_says_where_the_app_store_comes_from(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "[default: $ACTORFLOW_STORE, else the app's store, else ./.actorflow]" in result.output


ALL_COMMANDS = ["runs", "checkpoints", "show", "result", "diff", "validate", "log", "prune"]
ALL_COMMANDS += ["compare", "demo", "start", "recover", "fork", "resume"]


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_help_shows_no_markup_of_docstrings(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "``" not in result.output, command
    # flags show no type, arguments their names as docs/cli.md writes them
    assert "<bool>" not in result.output
    assert "{" not in result.output


def test_usage_names_arguments_as_the_docs_do() -> None:
    result = runner.invoke(app, ["diff", "--help"], env={"COLUMNS": "200"})
    assert "Usage: actorflow diff [OPTIONS] RUN A [B]" in result.output


class TestProgramInHints:
    """Suggested commands run as the user ran this one."""

    def test_a_path_off_path_is_kept(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sys, "argv", [".venv/bin/actorflow", "demo"])
        monkeypatch.setenv("PATH", "")
        assert program() == ".venv/bin/actorflow"

    def test_python_dash_m(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sys, "argv", ["/x/actorflow/__main__.py", "demo"])
        assert program().endswith(" -m actorflow")

    def test_anything_else_is_the_plain_name(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sys, "argv", ["pytest"])
        assert program() == "actorflow"


def test_several_actorflow_errors_at_once_are_one_line_not_a_group() -> None:
    async def fail_twice() -> None:
        async def fail(run_id: str) -> None:
            raise RunNotFoundError(run_id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(fail, "a")
            tg.start_soon(fail, "b")

    with pytest.raises(typer.Exit) as info:
        run_command(fail_twice, debug=False)
    assert info.value.exit_code == EXIT_CODES["not_found"]
