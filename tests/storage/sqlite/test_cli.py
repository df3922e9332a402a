"""``--store sqlite:///path`` in the CLI: readers on real data, ``validate`` naming a row."""

from __future__ import annotations

import json
import urllib.request
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.storage import SqliteStore
from tests.cli.stored import populate
from tests.cli.test_read_only_store import LEDGER_APP, read_only
from tests.runtime.workflow.ledger_flow import RUN, interrupted_run
from tests.storage.sqlite.test_conformance import flip_byte
from tests.ui.serving import serving

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def test_the_readers_work_on_a_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    anyio.run(populate, url)
    result = cli("runs", "--store", url, "--json")
    assert result.exit_code == EXIT_CODES["ok"], result.output
    rows = json.loads(result.stdout)
    assert {r["run_id"]: r["alive"] for r in rows} == {"run-a": False, "run-b": False}
    for args in (["show", "run-b", "live"], ["checkpoints", "run-a"], ["validate"]):
        result = cli(*args, "--store", url)
        assert result.exit_code == EXIT_CODES["ok"], result.output
    result = cli("compare", "run-a", "run-b", "--store", url)
    assert result.exit_code == EXIT_CODES["ok"], result.output


def test_validate_names_the_table_and_row_of_a_damaged_record(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    url = f"sqlite:///{db}"
    anyio.run(populate, url)
    flip_byte(str(db), "log", "record", "run_id = ? AND position = ?", ("run-a", 1))
    result = cli("validate", "--store", url)
    assert result.exit_code == EXIT_CODES["corrupt"], result.output
    assert "log row (run 'run-a', position 1)" in result.output.replace("\n", " ")


def test_a_file_that_is_no_sqlite_database_is_named(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_bytes(b"these are my notes, not a database\n" * 100)
    result = cli("runs", "--store", f"sqlite:///{db}")
    assert result.exit_code == EXIT_CODES["error"], result.output
    assert "not an SQLite database" in result.output
    assert db.read_bytes() == b"these are my notes, not a database\n" * 100


def test_the_inspector_serves_a_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    anyio.run(populate, url)
    with (
        serving("--store", url, "--read-only") as address,
        urllib.request.urlopen(address, timeout=30) as reply,
    ):
        page = reply.read().decode()
    assert "run-a" in page
    assert "run-b" in page


def test_a_read_only_store_is_read_and_a_write_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    anyio.run(populate, f"sqlite:///{folder / 'store.db'}")

    async def interrupt() -> None:
        async with SqliteStore(folder / "store.db") as store:
            await interrupted_run(store, RUN)

    anyio.run(interrupt)
    with read_only(folder) as view:
        url = f"sqlite:///{view}/store.db"
        result = cli("runs", "--store", url, "--json")
        assert result.exit_code == EXIT_CODES["ok"], result.output
        assert {r["run_id"] for r in json.loads(result.stdout)} == {"run-a", "run-b", RUN}
        result = cli("validate", "--store", url)
        assert result.exit_code == EXIT_CODES["ok"], result.output
        result = cli("recover", "--app", LEDGER_APP, "--store", url)
        assert result.exit_code == EXIT_CODES["error"], result.output
        assert "read-only to this process" in result.output


def test_a_reader_never_creates_a_store_where_a_path_was_mistyped(tmp_path: Path) -> None:
    result = cli("runs", "--store", f"sqlite:///{tmp_path / 'typo.db'}")
    assert result.exit_code == EXIT_CODES["error"], result.output
    assert "no actorflow store at" in result.output
    assert not (tmp_path / "typo.db").exists()
