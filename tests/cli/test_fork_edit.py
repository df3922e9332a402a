"""``actorflow fork RUN CHECKPOINT --edit AGENT=FILE``: a fork with agents' states replaced.

On a real file store, through the CLI: the fork finishes with a result that
shows the edit, and every bad ``--edit`` (no such file, not JSON, an agent the
checkpoint lacks, a state that does not fit) is one line naming what is
wrong, exit code 2, with nothing stored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app

runner = CliRunner()
APP = "tests.runtime.workflow.fork_flow:make_runtime"


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, str]:
    """A store with a finished ``Ledger`` run ``source``, and the end of its first phase."""
    store = str(tmp_path / "store")
    started = cli(
        "start", "tests.fork_flow.Ledger", "--input", '"a"', "--run-id", "source",
        "--app", APP, "--store", store,
    )  # fmt: skip
    assert started.exit_code == EXIT_CODES["ok"], started.output
    rows = json.loads(cli("checkpoints", "source", "--store", store, "--json").stdout)
    first = next(r["snapshot_id"] for r in rows if r["trigger"] == "phase_end")
    return store, first


def fork(store: str, checkpoint: str, *edits: str) -> Result:
    args = [f"--edit={e}" for e in edits]
    return cli("fork", "source", checkpoint, *args, "--app", APP, "--store", store, "--json")


def run_ids(store: str) -> list[str]:
    return sorted(r["run_id"] for r in json.loads(cli("runs", "--store", store, "--json").stdout))


def test_a_fork_with_an_edit_finishes_with_the_edited_state(
    ledger: tuple[str, str], tmp_path: Path
) -> None:
    store, checkpoint = ledger
    # what the docs show: the state as `show` prints it, changed, given back
    shown = json.loads(cli("show", "source", checkpoint, "--store", store).stdout)
    book = shown["agents"]["clerk"]["state"]
    assert book == {"entries": ["a"], "prefix": "", "pages": 1}
    state = tmp_path / "clerk.json"
    state.write_text(json.dumps({**book, "entries": ["x"], "prefix": "> "}))
    result = fork(store, checkpoint, f"clerk={state}")
    assert result.exit_code == EXIT_CODES["ok"], result.output
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "completed"
    assert outcome["result"] == ["x", "> A"]
    [run] = [r for r in json.loads(cli("runs", "--store", store, "--json").stdout) if r["parent"]]
    assert run["run_id"] == outcome["run_id"]


def bad_edit(ledger: tuple[str, str], *edits: str) -> str:
    store, checkpoint = ledger
    before = run_ids(store)
    result = fork(store, checkpoint, *edits)
    assert result.exit_code == EXIT_CODES["usage"], result.output
    assert "Traceback" not in result.output
    assert run_ids(store) == before, "nothing is stored"
    [line] = result.stderr.splitlines()
    return line


def test_a_missing_file_is_named(ledger: tuple[str, str], tmp_path: Path) -> None:
    line = bad_edit(ledger, f"clerk={tmp_path / 'nowhere.json'}")
    assert "nowhere.json: No such file or directory" in line
    assert "expected AGENT=FILE, FILE a JSON file of the agent's new state" in line


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_state_file_that_is_no_regular_file_is_named_not_read(
    kind: str, ledger: tuple[str, str], tmp_path: Path
) -> None:
    # A FIFO would block the read for ever and /dev/zero fill memory
    where = tmp_path / "pipe.json" if kind == "fifo" else Path("/dev/zero")
    if kind == "fifo":
        os.mkfifo(where)
    line = bad_edit(ledger, f"clerk={where}")
    expected = "a FIFO" if kind == "fifo" else "a character device"
    assert f"{where}: {expected}, not a regular file" in line


def test_a_file_that_is_not_json_is_named(ledger: tuple[str, str], tmp_path: Path) -> None:
    state = tmp_path / "clerk.json"
    state.write_text("{entries: [")
    line = bad_edit(ledger, f"clerk={state}")
    assert f"{state} is not JSON" in line


@pytest.mark.parametrize("spec", ["clerk", "=x.json", "clerk="])
def test_an_edit_that_is_not_agent_equals_file_is_refused(
    ledger: tuple[str, str], spec: str
) -> None:
    line = bad_edit(ledger, spec)
    assert f"invalid value '{spec}' for --edit: expected AGENT=FILE" in line


def test_an_agent_edited_twice_is_refused(ledger: tuple[str, str], tmp_path: Path) -> None:
    state = tmp_path / "clerk.json"
    state.write_text("{}")
    line = bad_edit(ledger, f"clerk={state}", f"clerk={state}")
    assert "each agent once" in line


def test_an_agent_the_checkpoint_lacks_is_named(ledger: tuple[str, str], tmp_path: Path) -> None:
    state = tmp_path / "clark.json"
    state.write_text("{}")
    line = bad_edit(ledger, f"clark={state}")
    assert "agent 'clark': the checkpoint holds no such agent (its agents: 'clerk')" in line
    checkpoint = ledger[1]
    assert f"`actorflow show source {checkpoint}" in line


def test_a_state_that_does_not_fit_names_the_field(ledger: tuple[str, str], tmp_path: Path) -> None:
    state = tmp_path / "clerk.json"
    state.write_text(json.dumps({"entries": ["ok", 7]}))
    line = bad_edit(ledger, f"clerk={state}")
    assert "the new state of agent 'clerk' does not fit Book at $.entries[1]" in line
    assert "Expected `str`, got `int`" in line
