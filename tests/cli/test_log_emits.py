"""``actorflow log --follow`` shows a run's durable emits (it follows with ``runtime.watch``)."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import app
from actorflow.storage import FileStore
from tests.runtime.workflow.test_emit_stream import Tokens
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


# --- streamed (ephemeral) events, from the store's event stream ---------------------------


def _streamed_run(path: Path) -> None:
    async def main() -> None:
        store = FileStore(path)
        async with Runtime(store=store) as runtime:
            await runtime.run(Tokens, 4, run_id="tokens")
            # a later attempt's writer dropped three at the end: a gap readers see
            writer = store.open_event_stream("tokens")
            await anyio.to_thread.run_sync(functools.partial(writer.write, [], lost=3, end=True))

    anyio.run(main)


def test_log_follow_shows_streamed_events_with_their_positions_and_gaps(tmp_path: Path) -> None:
    _streamed_run(tmp_path)
    result = cli("log", "tokens", "--store", str(tmp_path), "--follow")
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines() if line.strip()]
    streamed = [words for words in lines if words[1] == "streamed"]
    assert [words[0] for words in streamed] == ["~0", "~1", "~2", "~3"]
    assert " ".join(streamed[2][1:]) == 'streamed Token by orchestrator: {"n": 2}'
    assert any(" emit Token by orchestrator" in line for line in result.output.splitlines())
    (lost,) = [line for line in result.output.splitlines() if " lost " in line]
    assert lost.split()[:3] == ["~4", "lost", "3"]


def test_log_follow_resumes_streamed_events_from_event_start(tmp_path: Path) -> None:
    _streamed_run(tmp_path)
    result = cli("log", "tokens", "--store", str(tmp_path), "--follow", "--event-start", "3")
    lines = [line.split() for line in result.output.splitlines() if line.strip()]
    assert [(words[0], words[1]) for words in lines if words[0].startswith("~")] == [
        ("~3", "streamed"),
        ("~4", "lost"),
    ]


def test_log_follow_no_events_hides_them(tmp_path: Path) -> None:
    _streamed_run(tmp_path)
    result = cli("log", "tokens", "--store", str(tmp_path), "--follow", "--no-events")
    assert result.exit_code == 0, result.output
    assert " streamed " not in result.output
    assert " lost " not in result.output
    assert " emit Token by orchestrator" in result.output  # durable emits are log records


def test_log_follow_json_gives_streamed_events_an_event_position(tmp_path: Path) -> None:
    _streamed_run(tmp_path)
    result = cli("log", "tokens", "--store", str(tmp_path), "--follow", "--json")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    streamed = [line for line in lines if "event_position" in line]
    assert [(s["event_position"], s.get("event")) for s in streamed[:4]] == [
        (i, {"n": i}) for i in range(4)
    ]
    assert all(s["streamed"] and s["type"] == "Token" for s in streamed[:4])
    assert streamed[4] == {"event_position": 4, "lost": 3}
    records = [line for line in lines if "position" in line]
    assert [r["position"] for r in records] == list(range(len(records)))
