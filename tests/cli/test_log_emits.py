"""``actorflow log --follow`` shows a run's durable emits (it follows with ``runtime.watch``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import app
from actorflow.storage import FileStore
from tests.runtime.workflow.test_watch import Reports

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def _recorded(path: Path) -> None:
    async def main() -> None:
        async with FileStore(path) as store, Runtime(store=store) as runtime:
            await runtime.run(Reports, 2, run_id="emits")

    anyio.run(main)


def test_log_follow_prints_durable_emits_with_type_agent_and_event(tmp_path: Path) -> None:
    _recorded(tmp_path)
    result = cli("log", "emits", "--store", str(tmp_path), "--follow")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if " emit " in line]
    assert len(lines) == 2
    assert "emit Progress by orchestrator (step 0)" in lines[0]
    assert '{"step": 1}' in lines[1]


def test_log_follow_json_holds_the_emitted_event(tmp_path: Path) -> None:
    _recorded(tmp_path)
    result = cli("log", "emits", "--store", str(tmp_path), "--follow", "--json")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    emits = [r for r in records if r.get("kind") == "emit"]
    assert [r["result"] for r in emits] == [
        {"type": "Progress", "agent": "orchestrator", "event": {"step": i}} for i in range(2)
    ]
    assert [r["position"] for r in records] == list(range(len(records)))
