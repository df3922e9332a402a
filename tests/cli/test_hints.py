"""What the CLI suggests runs as printed; ``--store`` goes before or after the command;
a command that needs a store never makes one where the user mistyped it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import EXIT_CODES, app
from actorflow.errors import RunPaused
from actorflow.storage import FileStore
from tests.cli.signal_app import Approval
from tests.cli.test_waits import Expiring
from tests.runtime.workflow.ledger_flow import RUN, interrupted_run

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()
APP = "tests.cli.signal_app:make_runtime"


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "400"})


def _paused(path: str, workflow: type, run_id: str) -> None:
    async def pause() -> None:
        async with Runtime(store=FileStore(path)) as runtime:
            with pytest.raises(RunPaused):
                await runtime.run(workflow, None, run_id=run_id)

    anyio.run(pause)


def test_the_store_may_come_before_the_command(store_dir: str) -> None:
    before = cli("--store", store_dir, "runs", "--json")
    assert before.exit_code == EXIT_CODES["ok"], before.output
    assert [r["run_id"] for r in json.loads(before.stdout)] == ["run-a", "run-b"]
    # after the command, it wins
    both = cli("--store", "/nowhere/at/all", "checkpoints", "run-a", "--store", store_dir)
    assert both.exit_code == EXIT_CODES["ok"], both.output


def test_a_paused_runs_answer_names_the_app_and_store_given(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    _paused(store, Expiring, "expiring")
    result = cli("recover", "expiring", "--app", APP, "--store", store)
    assert result.exit_code == EXIT_CODES["paused"], result.output
    assert f"resume expiring --response TEXT --app {APP} --store {store}" in result.output
    # however narrow the terminal: a hint folded over two lines does not paste
    narrow = runner.invoke(
        app, ["recover", "expiring", "--app", APP, "--store", store], env={"COLUMNS": "40"}
    )
    assert f"resume expiring --response TEXT --app {APP} --store {store}" in narrow.output


def test_a_run_waiting_for_a_signal_is_told_to_get_one_not_to_resume(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    _paused(store, Approval, "ap")
    result = cli("result", "ap", "--store", store)
    assert result.exit_code == EXIT_CODES["paused"], result.output
    assert "resume" not in result.stderr
    assert f"signal ap tests.cli.Approve --json DATA --store {store}" in result.stderr
    assert f"recover ap --store {store}" in result.stderr
    recovered = cli("recover", "ap", "--app", APP, "--store", store)
    assert f"signal ap tests.cli.Approve --json DATA --app {APP} --store {store}" in (
        recovered.output
    )


def test_a_command_an_error_suggests_names_the_store_given(store_dir: str) -> None:
    result = cli("--store", store_dir, "checkpoints", "nope")
    assert result.exit_code == EXIT_CODES["not_found"]
    assert f"`actorflow runs --store {store_dir}` lists them" in result.output
    result = cli("recover", "nope", "--app", APP, "--store", store_dir)
    assert f"`actorflow runs --store {store_dir}` lists them" in result.output  # runs: no --app


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorflow", "worker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class TestWorkerStore:
    def test_a_worker_at_a_file_stops_at_once_saying_so(self, tmp_path: Path) -> None:
        file = tmp_path / "notes.txt"
        file.write_text("not a store")
        proc = _worker("--store", str(file))
        assert proc.returncode == EXIT_CODES["error"], proc.stderr
        assert proc.stderr.startswith(f"error: open store failed: {file} is a file")

    def test_a_worker_at_a_mistyped_path_makes_no_store(self, tmp_path: Path) -> None:
        where = tmp_path / "typo"
        proc = _worker("--store", str(where))
        assert proc.returncode == EXIT_CODES["error"], proc.stderr
        assert "no actorflow store at" in proc.stderr
        assert not where.exists()


def test_a_worker_says_what_it_adopts_and_finishes_and_exits_0_when_stopped(
    tmp_path: Path,
) -> None:
    async def interrupt() -> None:
        async with FileStore(tmp_path) as store:
            await interrupted_run(store, RUN)

    anyio.run(interrupt)
    ledger = "tests.runtime.workflow.ledger_flow:make_runtime"
    proc = subprocess.Popen(
        [sys.executable, "-m", "actorflow", "worker", "--app", ledger, "--store", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, proc.kill)  # a hung worker fails the test, never hangs it
    watchdog.start()
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith(f"finished {RUN}"):
                break
        assert lines[-2:] == [f"adopted {RUN} (interrupted)\n", f"finished {RUN}: completed\n"]
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        # SIGTERM is how a service manager stops a worker: its normal end, exit 0
        assert proc.wait() == 0
    finally:
        watchdog.cancel()
        proc.kill()
    assert rest.startswith("stopped: the runs it drove are left interrupted for other workers")
    assert f"recover --app {ledger} --store {tmp_path}`" in rest


def test_result_of_an_interrupted_run_says_how_to_continue_it(store_dir: str) -> None:
    result = cli("result", "run-b", "--store", store_dir)
    assert result.exit_code == EXIT_CODES["not_finished"]
    assert f"continue it: actorflow recover run-b --store {store_dir}" in result.stderr
