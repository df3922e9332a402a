"""``actorflow export`` and ``actorflow replay`` on a real file store."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import app
from actorflow.storage import Codec, FileStore, RunManifest
from actorflow.testing import CrashingStore, replay
from tests.cli import replay_app
from tests.cli.replay_app import Counted, Deployed

if TYPE_CHECKING:
    from collections.abc import Iterator

runner = CliRunner()
APP = "tests.cli.replay_app:make"


def cli(*args: str) -> Result:
    with capture_logs():  # warnings (sealed runs skipped) kept out of the JSON on stdout
        return runner.invoke(app, list(args), env={"COLUMNS": "200", **UNSET})


def fingerprint(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


KEY = bytes(range(32))
UNSET = {"ACTORFLOW_KEYS": None, "ACTORFLOW_KEY_FILE": None, "ACTORFLOW_KEY_ID": None}


async def _populate(path: str, codec: Codec | None = None) -> None:
    async with Runtime(store=FileStore(path, codec=codec)) as runtime:
        await runtime.run(Deployed, "first", run_id="done-1")
        await runtime.run(Deployed, "second", run_id="done-2")
    crashing = CrashingStore(FileStore(path, codec=codec), crash_after=2)
    async with Runtime(store=crashing) as runtime:
        handle = await runtime.start(Deployed, "third", run_id="crashed")
        async with anyio.create_task_group() as tg:

            async def stop_at_crash() -> None:
                await crashing.crashed.wait()
                handle.cancel()

            tg.start_soon(stop_at_crash)
            await handle.wait()
            tg.cancel_scope.cancel()


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[Path]:
    replay_app.CHANGE = "none"
    folder = tmp_path / "store"
    anyio.run(_populate, str(folder))
    yield folder
    replay_app.CHANGE = "none"


def test_replay_of_unchanged_code_is_ok_and_writes_nothing(deployed: Path) -> None:
    before = fingerprint(deployed)
    started = Counted.started
    result = cli("replay", "--app", APP, "--store", str(deployed), "--all")
    assert result.exit_code == 0, result.output
    assert "done-1: ok, replayed" in result.output
    assert "crashed: ok" in result.output
    assert "a recovery would go on live from step" in result.output
    assert Counted.started == started  # no agent was started
    assert fingerprint(deployed) == before


def test_an_app_factory_that_needs_the_store_is_given_the_one_replayed(deployed: Path) -> None:
    app_on = "tests.cli.replay_app:make_on"
    replay_app.given_stores.clear()
    result = cli("replay", "--app", app_on, "--store", str(deployed), "--all")
    assert result.exit_code == 0, result.output
    assert "done-1: ok, replayed" in result.output
    assert replay_app.given_stores == [str(deployed)]
    # ACTORFLOW_STORE names it as --store does
    replay_app.given_stores.clear()
    env = {"COLUMNS": "200", "ACTORFLOW_STORE": str(deployed), **UNSET}
    with capture_logs():
        result = runner.invoke(app, ["replay", "--app", app_on, "done-2"], env=env)
    assert result.exit_code == 0, result.output
    assert "done-2: ok, replayed" in result.output
    assert replay_app.given_stores == [str(deployed)]


def test_a_change_that_breaks_determinism_fails_replay(deployed: Path) -> None:
    before = fingerprint(deployed)
    replay_app.CHANGE = "inserted"
    result = cli("replay", "--app", APP, "--store", str(deployed), "done-1", "done-2")
    assert result.exit_code == 1, result.output
    assert "done-1: DIVERGED at step 2" in result.output
    assert "replay_app.py" in result.output
    assert fingerprint(deployed) == before


def test_the_same_change_behind_patched_passes(deployed: Path) -> None:
    replay_app.CHANGE = "patched"
    result = cli("replay", "--app", APP, "--store", str(deployed), "--all", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["run_id"] for r in rows} == {"done-1", "done-2", "crashed"}
    assert all(r["ok"] for r in rows)


def test_export_then_replay_the_history_file(deployed: Path, tmp_path: Path) -> None:
    path = tmp_path / "done-1.afh"
    before = fingerprint(deployed)
    result = cli("export", "done-1", "-o", str(path), "--store", str(deployed))
    assert result.exit_code == 0, result.output
    assert fingerprint(deployed) == before
    ok = cli("replay", "--app", APP, "--history", str(path))
    assert ok.exit_code == 0, ok.output
    replay_app.CHANGE = "inserted"
    bad = cli("replay", "--app", APP, "--history", str(path))
    assert bad.exit_code == 1
    assert "DIVERGED" in bad.output

    async def in_pytest() -> None:
        report = await replay(path, Deployed)
        assert not report.ok
        replay_app.CHANGE = "patched"
        assert (await replay(path, Deployed)).ok

    anyio.run(in_pytest)


def test_bad_histories_are_reported_and_the_rest_still_checked(
    deployed: Path, tmp_path: Path
) -> None:
    good = tmp_path / "good.afh"
    assert cli("export", "done-1", "-o", str(good), "--store", str(deployed)).exit_code == 0
    cut = tmp_path / "cut.afh"
    cut.write_bytes(good.read_bytes()[:100])
    result = cli("replay", "--app", APP, "--history", str(cut), "--history", str(good))
    assert result.exit_code == 1
    assert "HistoryFileTruncated" in result.output or "ends early" in result.output
    assert "done-1: ok" in result.output


def test_a_run_of_a_workflow_the_app_does_not_define_is_a_named_error(deployed: Path) -> None:
    async def orphan() -> None:
        store = FileStore(str(deployed))
        manifest = RunManifest(
            run_id="gone", workflow="tests.cli.replay.Gone", input=b"\xc0", input_hash="x"
        )
        await store.create_run(manifest)
        await store.aclose()

    anyio.run(orphan)
    result = cli("replay", "--app", APP, "--store", str(deployed), "--all")
    assert result.exit_code == 1
    assert "gone: not replayed" in result.output
    assert "RegistryError" in result.output or "tests.cli.replay.Gone" in result.output
    assert "done-1: ok" in result.output  # the others are still checked
    only = cli("replay", "--app", APP, "--store", str(deployed), "--all", "--workflow", "nope")
    assert only.exit_code == 0
    assert "0 run(s)" in only.output


def test_a_sealed_store_without_its_key_is_a_named_error_per_run(tmp_path: Path) -> None:
    folder = tmp_path / "sealed"
    replay_app.CHANGE = "none"
    anyio.run(_populate, str(folder), Codec(keys={"k1": KEY}))
    result = cli("replay", "--app", APP, "--store", str(folder), "done-1", "--json")
    assert result.exit_code == 1
    [row] = json.loads(result.stdout)
    assert row["error_type"] == "EncryptionKeyMissingError"
    assert "--key-file" in row["error"]
    every = cli("replay", "--app", APP, "--store", str(folder), "--all", "--json")
    assert every.exit_code == 1
    assert {r["error_type"] for r in json.loads(every.stdout)} == {"EncryptionKeyMissingError"}
    keys = tmp_path / "keys"
    keys.write_text(f"k1:{base64.b64encode(KEY).decode()}\n")
    path = tmp_path / "sealed.afh"
    exported = cli(
        "export", "done-1", "-o", str(path), "--store", str(folder), "--key-file", str(keys)
    )
    assert exported.exit_code == 0, exported.output
    assert b"first" in path.read_bytes()  # decrypted: portable without the key
    ok = cli("replay", "--app", APP, "--store", str(folder), "--key-file", str(keys), "--all")
    assert ok.exit_code == 0, ok.output


def test_replay_needs_runs_or_histories(deployed: Path) -> None:
    result = cli("replay", "--app", APP, "--store", str(deployed))
    assert result.exit_code == 2


def test_since_takes_an_age_with_all(deployed: Path) -> None:
    recent = cli("replay", "--app", APP, "--store", str(deployed), "--all", "--since", "1d")
    assert recent.exit_code == 0, recent.output
    assert "3 run(s)" in recent.output
    bad = cli("replay", "--app", APP, "--store", str(deployed), "--all", "--since", "soon")
    assert bad.exit_code == 2
    alone = cli("replay", "--app", APP, "--store", str(deployed), "done-1", "--since", "1d")
    assert alone.exit_code == 2


def test_a_redacted_export_replays_and_holds_no_payload(deployed: Path, tmp_path: Path) -> None:
    path = tmp_path / "redacted.afh"
    result = cli("export", "done-1", "-o", str(path), "--redact", "--store", str(deployed))
    assert result.exit_code == 0, result.output
    plain = tmp_path / "plain.afh"
    assert cli("export", "done-1", "-o", str(plain), "--store", str(deployed)).exit_code == 0
    assert b"last" in plain.read_bytes()  # a message's text, in the agent's state
    assert b"last" not in path.read_bytes()
    assert cli("replay", "--app", APP, "--history", str(path)).exit_code == 0
    replay_app.CHANGE = "inserted"
    assert cli("replay", "--app", APP, "--history", str(path)).exit_code == 1


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_history_that_is_no_regular_file_is_named_not_read(kind: str, tmp_path: Path) -> None:
    # A FIFO would block the read for ever and /dev/zero fill memory
    if kind == "fifo":
        where = tmp_path / "pipe.afh"
        os.mkfifo(where)
    else:
        where = Path("/dev/zero") if kind == "device" else tmp_path
    result = cli("replay", "--app", APP, "--history", str(where))
    assert result.exit_code == 1, result.output
    expected = {"fifo": "a FIFO", "device": "a character device", "folder": "a folder"}[kind]
    assert f"{where}: not replayed:" in result.output
    assert f"{expected}, not a regular file" in result.output
