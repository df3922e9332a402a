"""The readers on a store another hand has been at (issue 23): each finding named, none hangs."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.storage import FileStore

runner = CliRunner()


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def _post(store_dir: str, run_id: str, *entry_ids: str) -> None:
    async def body() -> None:
        async with FileStore(store_dir) as store:
            for entry_id in entry_ids:
                await store.post(run_id, entry_id=entry_id, type="T", payload=b"\xc0")

    anyio.run(body)


def test_a_snapshot_name_with_nan_for_its_time_is_not_a_checkpoint(store_dir: str) -> None:
    folder = Path(store_dir) / "runs" / "run-a" / "snapshots"
    (folder / "000000003_20260101T000000Z_p_evil~t~nan~1~1.ckpt").touch()
    result = cli("checkpoints", "run-a", "--store", store_dir)
    assert result.exit_code == 0, result.output
    assert "evil" not in result.output
    rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
    assert [r["snapshot_id"] for r in rows] == ["0001-research", "0002-review", "0003-done"]


def test_validate_names_a_name_in_the_index_that_is_no_run_id(store_dir: str) -> None:
    stray = Path(store_dir) / "runs" / ".unfinished" / "not a run"
    stray.touch()
    with capture_logs():
        result = cli("validate", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["corrupt"], result.output
    assert "index of unfinished runs" in " ".join(result.output.split())
    assert str(stray) in result.output.replace("\n", "")


def test_validate_reads_inboxes_and_names_a_damaged_entry(store_dir: str) -> None:
    _post(store_dir, "run-b", "m0", "m1", "m2")
    assert "3 inbox message(s) read" in cli("validate", "--store", store_dir).output
    entry = Path(store_dir) / "runs" / "run-b" / "inbox" / f"{1:020d}.msg"
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    result = cli("validate", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["corrupt"], result.output
    report = json.loads(cli("validate", "run-b", "--store", store_dir, "--json").stdout)
    [problem] = report["problems"]
    assert (problem["run_id"], problem["what"]) == ("run-b", str(entry))
    assert "the run skips it and reads the messages after it" in problem["detail"]
