"""The readers on a store another hand has been at (issue 23): each finding named, none hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.storage import EventRecord, FileStore, RunManifest, RunStatus, Snapshot

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


def _long_run(store_dir: str) -> None:
    """A finished run whose log spans many small segments, a checkpoint near its end."""

    async def body() -> None:
        async with FileStore(store_dir, segment_bytes=64) as store:
            await store.create_run(
                RunManifest(
                    run_id="long",
                    workflow="W",
                    input=b"\xc0",
                    input_hash="h",
                    status=RunStatus.COMPLETED,
                    created=1_700_000_000.0,
                )
            )
            for i in range(10):
                await store.append("long", [EventRecord(kind="e", data=b"%d" % i)])
            await store.write_snapshot(
                Snapshot(
                    run_id="long",
                    snapshot_id="s8",
                    position=8,
                    created=1_700_000_001.0,
                    trigger="t",
                )
            )

    anyio.run(body)


def test_a_log_pruned_below_its_checkpoint_validates_and_prints_from_its_start(
    store_dir: str,
) -> None:
    _long_run(store_dir)
    pruned = cli("prune", "--keep", "1", "--store", store_dir, "--json")
    assert json.loads(pruned.stdout)["log_records_deleted"] == 8
    result = cli("validate", "--store", store_dir)
    assert result.exit_code == 0, result.output
    printed = cli("log", "long", "--store", store_dir, "--json")
    assert printed.exit_code == 0, printed.output
    assert [json.loads(line)["position"] for line in printed.stdout.splitlines()] == [8, 9]
    assert "records before position 8 were pruned" in printed.stderr


def test_validate_names_a_log_cut_past_its_every_checkpoint(store_dir: str) -> None:
    _long_run(store_dir)
    cli("prune", "--keep", "1", "--store", store_dir)
    for snapshot in (Path(store_dir) / "runs" / "long" / "snapshots").iterdir():
        snapshot.unlink()
    result = cli("validate", "long", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["corrupt"], result.output
    assert "no checkpoint at or after it" in " ".join(result.output.split())


@pytest.mark.parametrize("what", ["fifo", "zero"])
@pytest.mark.timeout(30)
def test_a_key_file_that_is_no_regular_file_is_refused_at_once(
    store_dir: str, tmp_path: Path, what: str
) -> None:
    key_file = tmp_path / "keys"
    if what == "fifo":
        os.mkfifo(key_file)
    else:
        key_file.symlink_to("/dev/zero")
    result = cli("runs", "--store", store_dir, "--key-file", str(key_file))
    assert result.exit_code == EXIT_CODES["usage"], result.output
    assert "not a regular file" in " ".join(result.output.split())


@pytest.mark.parametrize(("what", "kind"), [("fifo", "a FIFO"), ("zero", "a character device")])
@pytest.mark.timeout(30)
def test_validate_and_checkpoints_name_a_checkpoint_that_is_no_regular_file(
    store_dir: str, what: str, kind: str
) -> None:
    [snapshot] = Path(store_dir).glob("runs/run-a/snapshots/*0002-review*")
    snapshot.unlink()
    if what == "fifo":
        os.mkfifo(snapshot)
    else:
        snapshot.symlink_to("/dev/zero")
    result = cli("validate", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["corrupt"], result.output
    assert f"{kind}, not a regular file" in " ".join(result.output.split())
    rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
    assert rows[1]["checksum"] == f"corrupt: {kind}, not a regular file"
