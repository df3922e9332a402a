"""``actorflow log`` shows how long each step took, from when it was issued to its record."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner

from actorflow.cli import app
from actorflow.storage import FileStore, RunManifest, StepRecord

if TYPE_CHECKING:
    from pathlib import Path


def _stored(path: Path) -> None:
    async def main() -> None:
        async with FileStore(path) as store:
            await store.create_run(
                RunManifest(run_id="timed", workflow="Flow", input=b"\xc0", input_hash="")
            )
            await store.append(
                "timed",
                [
                    StepRecord(step_id="0", kind="now", result=b"\xc0", issued=100.0, time=101.5),
                    StepRecord(step_id="1", kind="now", result=b"\xc0", issued=200.0, time=200.25),
                    StepRecord(step_id="2", kind="now", result=b"\xc0", time=300.0),  # older
                ],
            )

    anyio.run(main)


def test_log_shows_each_steps_duration_and_nothing_for_records_without_one(
    tmp_path: Path,
) -> None:
    _stored(tmp_path)
    result = CliRunner().invoke(app, ["log", "timed", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if " now " in line]
    assert lines[0].endswith("(1.5s)")
    assert lines[1].endswith("(250ms)")
    assert lines[2].endswith("null")
