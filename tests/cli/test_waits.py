"""The CLI shows what a paused run waits for, and until when."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.cli import app
from actorflow.cli._render import when
from actorflow.errors import RunPaused
from actorflow.storage import FileStore

if TYPE_CHECKING:
    from pathlib import Path


class Expiring(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        return await ctx.wait_for_input("sign off?", timeout=3600, default="no")


async def _pause(path: str) -> float:
    async with Runtime(store=FileStore(path)) as runtime:
        with pytest.raises(RunPaused) as info:
            await runtime.run(Expiring, None, run_id="expiring")
    assert info.value.deadline is not None
    return info.value.deadline


def test_runs_and_log_show_a_paused_runs_prompt_and_deadline(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    deadline = anyio.run(_pause, path)
    runner = CliRunner()
    runs = runner.invoke(app, ["runs", "--store", path], env={"COLUMNS": "300"})
    assert runs.exit_code == 0, runs.output
    assert "waits until" in runs.output
    assert "sign off?" in runs.output
    assert when(deadline) in runs.output
    rows = json.loads(runner.invoke(app, ["runs", "--store", path, "--json"]).stdout)
    assert rows[0]["deadline"] == deadline
    log = runner.invoke(app, ["log", "expiring", "--store", path], env={"COLUMNS": "300"})
    assert log.exit_code == 0, log.output
    assert f"event input_requested 0: sign off? until {when(deadline)}" in log.output
