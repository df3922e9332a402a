"""``actorflow compare RUN_A RUN_B``: a run and its edited fork side by side, on a file store."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()
APP = "tests.runtime.workflow.fork_flow:make_runtime"
MARKUP = "[red]x[/red] "


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def forked(tmp_path: Path) -> tuple[str, str]:
    """A store with a run ``source`` and a fork of it whose clerk's prefix is Rich markup."""
    store = str(tmp_path / "store")
    started = cli(
        "start", "tests.fork_flow.Ledger", "--input", '"a"', "--run-id", "source",
        "--app", APP, "--store", store,
    )  # fmt: skip
    assert started.exit_code == EXIT_CODES["ok"], started.output
    rows = json.loads(cli("checkpoints", "source", "--store", store, "--json").stdout)
    checkpoint = next(r["snapshot_id"] for r in rows if r["trigger"] == "phase_end")
    state = tmp_path / "clerk.json"
    state.write_text(json.dumps({"entries": ["x", "y"], "prefix": MARKUP}))
    result = cli(
        "fork", "source", checkpoint, "--edit", f"clerk={state}",
        "--app", APP, "--store", store, "--json",
    )  # fmt: skip
    assert result.exit_code == EXIT_CODES["ok"], result.output
    return store, json.loads(result.stdout)["run_id"]


def test_compare_shows_where_the_fork_went_apart(forked: tuple[str, str]) -> None:
    store, fork_id = forked
    result = cli("compare", "source", fork_id, "--store", store)
    assert result.exit_code == EXIT_CODES["ok"], result.output
    shown = result.stdout
    assert f"B {fork_id}: tests.fork_flow.Ledger, completed" in shown
    assert re.search(r"B is a fork of A's checkpoint \d{4}-p3, with clerk edited", shown)
    assert "ask clerk close.0/1" in shown
    assert 'description: "2 entries"' in shown
    assert 'description: "3 entries"' in shown
    assert MARKUP in shown, "user data is shown, never read as markup"
    # the shared past is equal: hidden unless asked for
    assert "open.0/1" not in shown
    assert "3 of 4 steps the same, not shown (--all shows them)" in shown
    everything = cli("compare", "source", fork_id, "--store", store, "--all").stdout
    assert "ask clerk open.0/1" in everything


def test_compare_json_is_the_library_s_comparison(forked: tuple[str, str]) -> None:
    store, fork_id = forked
    result = cli("compare", "source", fork_id, "--store", store, "--json")
    assert result.exit_code == EXIT_CODES["ok"], result.output
    data = json.loads(result.stdout)
    assert data["differs"] is True
    assert data["b"]["parent"] == "source"
    assert [e["agent"] for e in data["b"]["fork_edits"]] == ["clerk"]
    assert data["result"]["a"] == ["a", "A"]
    assert data["result"]["b"] == ["x", "y", f"{MARKUP}A"]
    assert [p["differs"] for p in data["phases"]] == [False, True]


def test_a_run_compared_with_itself_has_no_difference(forked: tuple[str, str]) -> None:
    store, _ = forked
    result = cli("compare", "source", "source", "--store", store)
    assert result.exit_code == EXIT_CODES["ok"], result.output
    assert "no difference" in result.stdout
    assert "steps: all 4 the same" in result.stdout


def test_an_unknown_run_is_one_line(forked: tuple[str, str]) -> None:
    store, _ = forked
    result = cli("compare", "source", "nope", "--store", store)
    assert result.exit_code == EXIT_CODES["not_found"]
    assert result.stderr.startswith("error: no run 'nope' in the store")
    assert "Traceback" not in result.output
