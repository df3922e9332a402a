"""``runs``, ``show RUN live`` and ``Runtime.query`` name the same phase: the log tail's."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
import msgspec
from typer.testing import CliRunner

from actorflow import Runtime
from actorflow.cli import app
from actorflow.storage import (
    FileStore,
    PhaseEndRecord,
    RunManifest,
    RunStatus,
    Snapshot,
    StepRecord,
)

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


async def _write(path: str) -> None:
    """A run whose newest checkpoint is ``draft``'s start, and whose log has moved on to ``review``.

    ``review`` took no checkpoint of its own: its start coalesced with ``draft``'s end.
    """
    async with FileStore(path) as store:
        await store.create_run(
            RunManifest(
                run_id="essay",
                workflow="Essay",
                input=msgspec.msgpack.encode(None),
                input_hash="h",
                status=RunStatus.RUNNING,
                created=1_700_000_000.0,
                updated=1_700_000_000.0,
            )
        )
        await store.write_snapshot(
            Snapshot(
                run_id="essay",
                snapshot_id="0001-p0",
                position=0,
                created=1_700_000_001.0,
                trigger="phase_start",
                phase="draft",
            )
        )
        none = msgspec.msgpack.encode(None)
        await store.append(
            "essay",
            [
                StepRecord(step_id="draft.0/0", kind="now", result=none),
                PhaseEndRecord(phase_id="draft.0", name="draft", result=none),
                StepRecord(step_id="review.0/0", kind="now", result=none),
            ],
        )


def test_every_reader_names_the_phase_of_the_newest_logged_step(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    anyio.run(_write, path)
    [row] = json.loads(runner.invoke(app, ["runs", "--store", path, "--json"]).stdout)
    live = json.loads(
        runner.invoke(app, ["show", "essay", "live", "--store", path, "--json"]).stdout
    )

    async def query() -> str | None:
        async with FileStore(path) as store:
            return (await Runtime(store=store).query("essay")).phase

    assert (row["phase"], live["phase"], anyio.run(query)) == ("review", "review", "review")
