"""``--store sqlite:///path`` in the CLI: readers on real data, ``validate`` naming a row."""

from __future__ import annotations

import json
import urllib.request
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from tests.cli.stored import populate
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
