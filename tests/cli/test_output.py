"""Output a script can use: data on stdout unwrapped, progress only on a terminal's stderr."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

from rich.console import Console
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.cli._progress import live_progress

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()
APP = "tests.cli.signal_app:make_runtime"


def cli(*args: str) -> Result:
    # a narrow terminal: rich would fold anything longer
    return runner.invoke(app, list(args), env={"COLUMNS": "80"})


def start(store: Path, *args: str) -> Result:
    return cli("start", "tests.cli.Essay", "--app", APP, "--store", str(store), *args)


def test_start_off_a_terminal_prints_its_outcome_and_no_progress(tmp_path: Path) -> None:
    result = start(tmp_path / "store", "--input", "3", "--run-id", "essay")
    assert result.exit_code == EXIT_CODES["ok"], result.output
    assert result.stdout.splitlines() == ["completed essay: completed", '"word0 word1 word2"']
    assert result.stderr == ""


def test_a_long_result_is_one_line_of_json_however_narrow_the_terminal(tmp_path: Path) -> None:
    result = start(tmp_path / "store", "--input", "60", "--run-id", "long")
    assert result.exit_code == EXIT_CODES["ok"], result.output
    [_, data] = result.stdout.splitlines()
    assert json.loads(data) == " ".join(f"word{i}" for i in range(60))


def test_fork_names_the_new_run_before_it_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    start(store, "--input", "2", "--run-id", "essay")
    result = cli("fork", "essay", "latest~1", "--app", APP, "--store", str(store))
    assert result.exit_code == EXIT_CODES["ok"], result.output
    first, *rest = result.stdout.splitlines()
    assert first.startswith("forking essay at latest~1 as essay-fork-")
    new_id = first.rsplit(" ", 1)[1]
    assert f"as {new_id}: completed" in rest[0]
    as_json = cli("fork", "essay", "latest~1", "--app", APP, "--store", str(store), "--json")
    assert as_json.stderr.startswith("forking essay at latest~1 as ")
    assert json.loads(as_json.stdout)["status"] == "completed"


def test_the_bar_shows_a_workflows_phase_and_its_logged_records_not_a_bare_count() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with live_progress(console) as sink:
        sink.run_phase("draft")
        sink.checkpoint_written("0002-p7", 7)
    shown = screen.getvalue()
    assert "draft" in shown
    assert "7 records logged" in shown
    assert "0/?" not in shown
    assert "starting" not in shown.rsplit("\r", 1)[-1]
