"""``actorflow signal``, ``update`` and ``cancel``: talking to a run from the shell."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import EXIT_CODES, app
from actorflow.errors import RunPaused
from actorflow.storage import FileStore, RunStatus
from tests.cli.signal_app import Approval, SignalAppFinish, Tally

runner = CliRunner()
APP = "tests.cli.signal_app:make_runtime"


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


@pytest.fixture
def paused(tmp_path: Path) -> str:
    """A store with run ``ap`` paused until an ``Approve`` signal comes."""
    store = str(tmp_path / "store")

    async def pause() -> None:
        async with Runtime(store=FileStore(store)) as runtime:
            with pytest.raises(RunPaused):
                await runtime.run(Approval, None, run_id="ap")

    anyio.run(pause)
    return store


class TestSignal:
    def test_a_signal_by_its_registered_name_lets_recover_finish_the_run(self, paused: str) -> None:
        data = '{"by": "ann", "level": 2}'
        sent = cli(
            "signal", "ap", "tests.cli.Approve", "--json", data, "--app", APP, "--store", paused
        )
        assert sent.exit_code == EXIT_CODES["ok"], sent.output
        assert "sent tests.cli.Approve to ap" in sent.output
        result = cli("recover", "ap", "--app", APP, "--store", paused, "--json")
        assert result.exit_code == EXIT_CODES["ok"], result.output
        [done] = json.loads(result.stdout)["recovered"]
        assert done["result"] == "ann:2"

    def test_recover_of_every_run_continues_a_paused_run_its_signal_reached(
        self, paused: str
    ) -> None:
        data = '{"by": "bo", "level": 1}'
        cli("signal", "ap", "tests.cli.Approve", "--json", data, "--app", APP, "--store", paused)
        result = cli("recover", "--app", APP, "--store", paused, "--json")
        assert result.exit_code == EXIT_CODES["ok"], result.output
        assert [r["result"] for r in json.loads(result.stdout)["recovered"]] == ["bo:1"]

    @pytest.mark.parametrize("kind", ["fifo", "device"])
    def test_a_payload_file_that_is_no_regular_file_is_named_not_read(
        self, kind: str, paused: str, tmp_path: Path
    ) -> None:
        # A FIFO would block the read for ever and /dev/zero fill memory
        where = tmp_path / "pipe.json" if kind == "fifo" else Path("/dev/zero")
        if kind == "fifo":
            os.mkfifo(where)
        args = ["signal", "ap", "tests.cli.Approve", "--file", str(where)]
        sent = cli(*args, "--app", APP, "--store", paused)
        assert sent.exit_code == EXIT_CODES["usage"], sent.output
        expected = "a FIFO" if kind == "fifo" else "a character device"
        assert f"{where}: {expected}, not a regular file" in sent.stderr

    def test_a_payload_from_a_file_and_an_id_that_makes_a_resend_harmless(
        self, paused: str, tmp_path: Path
    ) -> None:
        payload = tmp_path / "approve.json"
        payload.write_text('{"by": "cy", "level": 5}')
        args = ["signal", "ap", "tests.cli.Approve", "--file", str(payload), "--id", "once"]
        for _ in range(2):
            sent = cli(*args, "--app", APP, "--store", paused)
            assert sent.exit_code == EXIT_CODES["ok"], sent.output
            assert "inbox entry 0, id once" in sent.output
        live = json.loads(cli("show", "ap", "live", "--store", paused, "--json").stdout)
        assert [(e["entry_id"], e["payload"]) for e in live["inbox"]] == [
            ("once", {"by": "cy", "level": 5})
        ]

    @pytest.mark.parametrize(
        ("data", "says"),
        [
            ('{"by": "ann", "level": "high"}', "`$.level`"),
            ('{"by": "ann"}', "missing required field `level`"),
            ("{not json", "JSON for a tests.cli.Approve"),
        ],
    )
    def test_a_payload_that_does_not_fit_names_the_field(
        self, paused: str, data: str, says: str
    ) -> None:
        sent = cli(
            "signal", "ap", "tests.cli.Approve", "--json", data, "--app", APP, "--store", paused
        )
        assert sent.exit_code == EXIT_CODES["usage"], sent.output
        assert sent.output.startswith("error: invalid value")
        assert says in sent.output

    def test_an_unknown_type_says_how_to_name_it_and_what_the_run_waits_for(
        self, paused: str
    ) -> None:
        sent = cli(
            "signal", "ap", "ApproveNoSuchName", "--json", "{}", "--app", APP, "--store", paused
        )
        assert sent.exit_code == EXIT_CODES["error"], sent.output
        assert "__actorflow_name__" in sent.output
        assert "--app" in sent.output
        assert "run 'ap' waits for tests.cli.Approve" in sent.output

    def test_exactly_one_of_json_and_file(self, paused: str) -> None:
        sent = cli("signal", "ap", "tests.cli.Approve", "--app", APP, "--store", paused)
        assert sent.exit_code == EXIT_CODES["usage"], sent.output
        assert "exactly one of them" in sent.output

    def test_an_unknown_run_exits_4(self, paused: str) -> None:
        data = '{"by": "ann", "level": 2}'
        sent = cli(
            "signal", "nope", "tests.cli.Approve", "--json", data, "--app", APP, "--store", paused
        )
        assert sent.exit_code == EXIT_CODES["not_found"], sent.output

    def test_a_mistyped_store_is_an_error_and_creates_nothing(self, tmp_path: Path) -> None:
        where = tmp_path / "typo"
        sent = cli("signal", "ap", "str", "--json", '"x"', "--store", str(where))
        assert sent.exit_code == EXIT_CODES["error"], sent.output
        assert "no actorflow store at" in sent.output
        assert not where.exists()


class TestCancel:
    def test_a_paused_run_is_cancelled_with_its_reason(self, paused: str) -> None:
        done = cli("cancel", "ap", "--reason", "not needed", "--app", APP, "--store", paused)
        assert done.exit_code == EXIT_CODES["ok"], done.output
        assert "cancelled ap" in done.output
        result = cli("result", "ap", "--store", paused)
        assert result.exit_code == EXIT_CODES["run_failed"]
        data = json.loads(result.stdout)
        assert data["status"] == RunStatus.CANCELLED
        assert "not needed" in data["error"]["message"]

    def test_a_finished_run_is_left_as_it_is(self, paused: str) -> None:
        cli("cancel", "ap", "--store", paused)
        again = cli("cancel", "ap", "--store", paused)
        assert again.exit_code == EXIT_CODES["ok"], again.output
        assert "had ended already (cancelled)" in again.output


async def _cli_process(*args: str) -> tuple[int, str, str]:
    """The CLI in a process of its own (this one's event loop hosts the run)."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "250"}
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "actorflow", *args], env=env, check=False
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_update_prints_the_live_runs_reply_and_a_signal_finishes_it(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with Runtime(store=FileStore(store)) as runtime:
        handle = await runtime.start(Tally, None, run_id="tally")
        where = ["--app", APP, "--store", store]
        args = ["update", "tally", "SignalAppCount", "--json", '{"item": "a"}', *where]
        code, out, err = await _cli_process(*args, "--update-id", "u1")
        assert code == EXIT_CODES["ok"], err
        assert json.loads(out) == 1
        # the same update id: the first reply, the handler not run again
        code, out, err = await _cli_process(*args, "--update-id", "u1")
        assert (code, json.loads(out)) == (EXIT_CODES["ok"], 1), err
        code, out, err = await _cli_process(
            "signal", "tally", "SignalAppFinish", "--json", "{}", *where
        )
        assert code == EXIT_CODES["ok"], err
        assert f"sent {SignalAppFinish.__qualname__} to tally" in out
        assert await handle.result() == ["a"]
