"""A step's message kept in its record: inline when small, a blob when large, redacted on export."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec
from typer.testing import CliRunner

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.cli import app
from actorflow.runtime import RuntimeConfig
from actorflow.runtime.reading import read_message, record_to_dict
from actorflow.runtime.replaying import read_run_history, redact, write_history_file
from actorflow.runtime.workflow.steps._ask import INLINE_MESSAGE_BYTES
from actorflow.storage import FileStore, MemoryStore, RetentionPolicy, StepRecord, prune
from actorflow.testing import replay

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store

SECRET = "whispered-only-in-the-message"


class Parcel(Request[int], frozen=True):
    label: str
    body: str = ""


class Courier(Specialist):
    __actorflow_name__ = "tests.step_messages.Courier"

    @handler
    async def carry(self, parcel: Parcel) -> int:
        return len(parcel.body)  # keeps nothing of it: only the record can show the message


class Delivery(Orchestrator):
    __actorflow_name__ = "tests.step_messages.Delivery"

    async def run(self, ctx: RunContext, size: int) -> list[int]:
        courier = await ctx.spawn(Courier, name="courier")
        small = await ctx.ask(courier, Parcel(SECRET))
        large = await ctx.ask(courier, Parcel("large", "x" * size))
        await ctx.send(courier, Parcel("sent", "y"))
        return [small, large]


async def _steps(store: Store, run_id: str) -> list[StepRecord]:
    log = await store.read_log(run_id, 0)
    return [r for r in log if isinstance(r, StepRecord) and r.kind in ("ask", "send")]


async def test_a_small_message_is_inline_a_large_one_a_blob(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    async with Runtime(store=store) as runtime:
        await runtime.run(Delivery, INLINE_MESSAGE_BYTES, run_id="parcels")
    small, large, sent = await _steps(store, "parcels")
    assert small.message is not None
    assert small.message.type == "Parcel"
    assert small.message.data is not None
    assert small.message.blob == ""
    assert await read_message(store, "parcels", small) == {"label": SECRET, "body": ""}
    assert record_to_dict(small)["message"] == {
        "type": "Parcel",
        "value": {"label": SECRET, "body": ""},
    }
    assert large.message is not None
    assert large.message.data is None
    assert large.message.blob  # a content-addressed blob of the run's
    value = await read_message(store, "parcels", large)
    assert value == {"label": "large", "body": "x" * INLINE_MESSAGE_BYTES}
    assert record_to_dict(large)["message"] == {"type": "Parcel", "blob": large.message.blob}
    assert sent.message is not None
    assert await read_message(store, "parcels", sent) == {"label": "sent", "body": "y"}
    # replay compares hashes, never messages: the run replays as it always did
    assert (await replay(store, Delivery, run_id="parcels")).ok


async def test_record_messages_off_keeps_only_the_hash() -> None:
    kept, bare = MemoryStore(), MemoryStore()
    async with Runtime(store=kept) as runtime:
        await runtime.run(Delivery, 10, run_id="kept")
    async with Runtime(store=bare, config=RuntimeConfig(record_messages=False)) as runtime:
        await runtime.run(Delivery, 10, run_id="kept")
    with_messages, without = await _steps(kept, "kept"), await _steps(bare, "kept")
    assert all(s.message is not None for s in with_messages)
    assert all(s.message is None for s in without)
    assert [s.args_hash for s in with_messages] == [s.args_hash for s in without]


async def test_a_redacted_export_blanks_messages_and_still_replays(tmp_path: Path) -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(Delivery, 10, run_id="exported")
    history = await read_run_history(store, "exported")
    plain, redacted = tmp_path / "plain.afh", tmp_path / "redacted.afh"
    write_history_file(history, plain)
    write_history_file(redact(history), redacted)
    assert SECRET.encode() in plain.read_bytes()  # only the message holds it
    assert SECRET.encode() not in redacted.read_bytes()
    blanked = redact(history)
    records = [*(blanked.snapshot.steps if blanked.snapshot else ()), *blanked.records]
    steps = [r for r in records if isinstance(r, StepRecord) and r.message]
    assert steps
    messages = [s.message for s in steps if s.message is not None]
    assert all(not m.blob for m in messages)
    assert msgspec.msgpack.decode(messages[0].data or b"") == {"label": "", "body": ""}
    report = await replay(redacted, Delivery)
    assert report.ok, report.describe()


async def _logged(path: Path) -> None:
    async with Runtime(store=FileStore(path)) as runtime:
        await runtime.run(Delivery, INLINE_MESSAGE_BYTES, run_id="logged")


def test_actorflow_log_shows_each_message(tmp_path: Path) -> None:
    anyio.run(_logged, tmp_path)
    runner = CliRunner()
    shown = runner.invoke(app, ["log", "logged", "--store", str(tmp_path)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert f'message Parcel: {{"label": "{SECRET}", "body": ""}}' in shown.output
    assert "message Parcel: (kept in a blob)" in shown.output
    as_json = runner.invoke(app, ["log", "logged", "--store", str(tmp_path), "--json"])
    assert f'"message": {{"type": "Parcel", "value": {{"label": "{SECRET}"' in as_json.output


async def test_retention_keeps_the_blob_of_a_message_a_kept_record_points_at(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    async with Runtime(store=store, config=RuntimeConfig(retention=None)) as runtime:
        await runtime.run(Delivery, INLINE_MESSAGE_BYTES, run_id="retained")
    _, large, _ = await _steps(store, "retained")
    assert large.message is not None
    await prune(store, RetentionPolicy(keep_last=1))
    assert await read_message(store, "retained", large) == {
        "label": "large",
        "body": "x" * INLINE_MESSAGE_BYTES,
    }
