"""A blocked run in the CLI: listed (with what diverged and under which code_version),
filtered by ``--status blocked``, its ``result`` explained, and recovered by the app
once its code replays the log again."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.storage import FileStore
from tests.runtime.workflow.ledger_flow import RESULT, blocked_run, define_ledger

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()
APP = "tests.runtime.workflow.ledger_flow:make_runtime"


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


@pytest.fixture
def store_dir(tmp_path: Path) -> str:
    """A file store with run ``stuck`` blocked under code_version ``v2``, and version 1 back."""

    async def block() -> None:
        store = FileStore(tmp_path)
        try:
            await blocked_run(store, "stuck", code_version="v2")
        finally:
            await store.aclose()

    try:
        anyio.run(block)
    finally:
        define_ledger(1)
    return str(tmp_path)


def test_runs_shows_a_blocked_run_with_its_error_and_code_version(store_dir: str) -> None:
    result = cli("runs", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["ok"], result.output
    assert "blocked" in result.output
    assert "blocked by" in result.output
    assert "NonDeterminismError" in result.output
    assert "code_version v2: NonDeterminismError" in result.output
    rows = json.loads(cli("runs", "--store", store_dir, "--status", "blocked", "--json").stdout)
    [row] = rows
    assert (row["run_id"], row["status"], row["blocked_code_version"]) == ("stuck", "blocked", "v2")
    assert row["error"].startswith("NonDeterminismError: ")
    failed = cli("runs", "--store", store_dir, "--status", "failed", "--json")
    assert json.loads(failed.stdout) == []


def test_result_of_a_blocked_run_says_how_to_continue_it(store_dir: str) -> None:
    result = cli("result", "stuck", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["run_failed"]
    assert json.loads(result.stdout)["status"] == "blocked"
    assert "recover stuck" in result.stderr


def test_recover_continues_it_once_the_code_replays_its_log(store_dir: str) -> None:
    # the app's runtime has no code_version: other code than blocked the run (v2)
    result = cli("recover", "--app", APP, "--store", store_dir, "--json")
    assert result.exit_code == EXIT_CODES["ok"], result.output
    [done] = json.loads(result.stdout)["recovered"]
    assert (done["run_id"], done["result"]) == ("stuck", RESULT)
