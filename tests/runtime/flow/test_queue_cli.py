"""``actorflow runs --queue NAME`` and each queue's depth after the table."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner

from actorflow import Queue, Runtime
from actorflow.cli import app
from tests.runtime.flow.queue_flows import Audited

if TYPE_CHECKING:
    from pathlib import Path


async def _submit(path: str) -> dict[str, str]:
    queues = [Queue("reports", max_concurrent=1), Queue("mail")]
    async with Runtime(store=path, queues=queues) as client:
        return {
            "r1": await client.submit(Audited, 1, queue="reports", priority=3),
            "r2": await client.submit(Audited, 2, queue="reports", dedup_key="k"),
            "m1": await client.submit(Audited, 3, queue="mail"),
            "plain": await client.submit(Audited, 4),
        }


def test_runs_filters_by_queue_and_shows_each_queues_depth(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    ids = anyio.run(_submit, path)
    runner = CliRunner()
    rows = json.loads(
        runner.invoke(app, ["runs", "--store", path, "--queue", "reports", "--json"]).stdout
    )
    assert sorted(r["run_id"] for r in rows) == sorted([ids["r1"], ids["r2"]])
    by_id = {r["run_id"]: r for r in rows}
    assert by_id[ids["r1"]]["priority"] == 3
    assert by_id[ids["r2"]]["dedup_key"] == "k"
    table = runner.invoke(app, ["runs", "--store", path], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "queue reports: 2 queued, 0 running" in table.output
    assert "queue mail: 1 queued, 0 running" in table.output
    assert "queue reports: 2 queued, 0 running (the oldest queued since " in table.output
