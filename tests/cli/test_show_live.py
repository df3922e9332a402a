"""``actorflow show RUN live``: the run as ``runtime.query`` reads it, as text or JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import EXIT_CODES, app
from actorflow.storage import FileStore
from tests.runtime.workflow.query_child import BIG_NOTE, Note, Watched, until_waiting

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()
HOSTILE = "[bold red]boom[/] \\"


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


async def _waiting_run(store: str) -> None:
    """``Watched`` left waiting for its ``Fix`` (interrupted), a hostile note in its inbox."""
    async with Runtime(store=FileStore(store)) as runtime:
        await runtime.start(Watched, None, run_id="watched")
        await until_waiting(runtime.store, "watched")
        await runtime.signal("watched", Note(HOSTILE), id=HOSTILE)


def test_show_live_prints_agents_waits_inbox_and_json(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    anyio.run(_waiting_run, store)
    text = cli("show", "watched", "live", "--store", store)
    assert text.exit_code == 0, text.output
    for shown in ("interrupted", "phase prepare", "count: 1, notes: <list of 1>", "signal Fix"):
        assert shown in text.output
    assert HOSTILE in text.output  # printed as it is, never read as markup
    assert "decision wait" in text.output
    data = json.loads(cli("show", "watched", "live", "--store", store, "--json").stdout)
    assert data["agents"]["big"]["state"] == {"count": 1, "notes": [BIG_NOTE]}
    assert [w["type"] for w in data["waits"]] == ["Fix"]
    assert [(e["entry_id"], e["payload"]) for e in data["inbox"]] == [(HOSTILE, {"text": HOSTILE})]
    assert data["position"] > 0
    missing = cli("show", "nope", "live", "--store", store)
    assert missing.exit_code == EXIT_CODES["not_found"], missing.output
