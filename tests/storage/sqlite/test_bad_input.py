"""What SqliteStore says of a file or a location it cannot use: a named error, with advice."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow.errors import (
    ConfigurationError,
    CorruptedDataError,
    LogCorruptedError,
    StoreSchemaError,
    StoreUnavailableError,
)
from actorflow.storage import RunManifest, Schedule, SqliteStore, StepRecord, open_store
from actorflow.storage.sqlite._schema import SCHEMA_VERSION
from tests.storage.sqlite.test_conformance import flip_byte

if TYPE_CHECKING:
    from pathlib import Path


def _manifest(run_id: str = "r1") -> RunManifest:
    return RunManifest(run_id=run_id, workflow="w", input=b"", input_hash="h")


async def _new_store(path: Path) -> None:
    async with SqliteStore(path) as store:
        await store.create_run(_manifest())
        await store.append("r1", [StepRecord(step_id=f"s{i}", kind="ask") for i in range(3)])


async def test_a_file_that_is_no_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"my notes " * 1000)
    async with SqliteStore(path) as store:
        with pytest.raises(StoreSchemaError, match="not an SQLite database"):
            await store.list_runs()
        with pytest.raises(StoreSchemaError, match="point the store at an actorflow store"):
            await store.create_run(_manifest())
    assert path.read_bytes() == b"my notes " * 1000


async def test_a_sqlite_database_of_another_program_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    async with SqliteStore(path) as store:
        with pytest.raises(StoreSchemaError, match="its tables: customers"):
            await store.list_runs()
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["customers"]


async def test_a_newer_schema_is_refused_with_upgrade_advice(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await _new_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    conn.close()
    async with SqliteStore(path) as store:
        with pytest.raises(StoreSchemaError, match="upgrade actorflow") as caught:
            await store.read_run("r1")
    assert caught.value.found == f"actorflow SQLite schema {SCHEMA_VERSION + 1}"


async def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "nowhere" / "store.db") as store:
        with pytest.raises(StoreUnavailableError, match=r"nowhere of .* does not exist; create it"):
            await store.list_runs()
    assert not (tmp_path / "nowhere").exists()


async def test_a_damaged_record_is_named_by_table_and_row(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await _new_store(path)
    flip_byte(str(path), "log", "record", "run_id = ? AND position = ?", ("r1", 1))
    async with SqliteStore(path) as store:
        with pytest.raises(LogCorruptedError, match=r"log row \(run 'r1', position 1\)"):
            await store.read_log("r1")
        assert len(await store.read_log("r1", 2)) == 1  # a damaged record before start: not read
        check = await store.check_sealed("r1")
        assert [where for where, _ in check.problems] == [f"{path}: log row (run 'r1', position 1)"]


async def test_a_missing_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await _new_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM log WHERE run_id = 'r1' AND position = 1")
    conn.close()
    async with SqliteStore(path) as store:
        with pytest.raises(LogCorruptedError, match=r"1\) is corrupt \(the row is missing"):
            await store.read_log("r1")


async def test_a_damaged_page_is_a_corrupted_data_error_naming_integrity_check(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    async with SqliteStore(path) as store:
        for n in range(30):
            await store.create_run(_manifest(f"r{n}"))
            await store.append(f"r{n}", [StepRecord(step_id="s", kind="ask", result=b"x" * 3000)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'log'").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page
    data[start : start + 64] = b"\xff" * 64  # the log table's root page: its header is gone
    path.write_bytes(bytes(data))
    async with SqliteStore(path) as store:
        with pytest.raises(CorruptedDataError, match="integrity_check"):
            await store.read_log("r1")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite://host/x.db",
        "sqlite:///x.db?mode=ro",
    ],
)
def test_urls_without_a_file_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        open_store(url)


def test_urls_name_relative_and_absolute_paths(tmp_path: Path) -> None:
    relative = open_store("sqlite:///runs/store.db")
    absolute = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    assert isinstance(relative, SqliteStore)
    assert isinstance(absolute, SqliteStore)
    assert relative.path == "runs/store.db"
    assert absolute.path == str(tmp_path / "store.db")


async def test_a_damaged_schedule_row_is_named_and_warned_about_once(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SqliteStore(path) as store:
        for schedule_id in ("good", "bad"):
            await store.put_schedule(
                Schedule(schedule_id=schedule_id, workflow="w", input=b"", every=60.0, anchor=0.0)
            )
    flip_byte(str(path), "schedules", "definition", "schedule_id = ?", ("bad",))
    async with SqliteStore(path) as store:
        with capture_logs() as logs:
            for _ in range(3):  # a worker lists at every poll
                assert [s.schedule_id for s in await store.list_schedules()] == ["good"]
        assert [e["schedule_id"] for e in logs if e["event"] == "schedule_unreadable"] == ["bad"]
        [entry] = await store.list_unreadable()
        assert (entry.schedule_id, entry.run_id) == ("bad", None)
        assert entry.location == f"{path}: schedules row ('bad', definition)"


def test_its_url_opens_the_same_file_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteStore("runs.db")
    assert store.url == f"sqlite:///{tmp_path / 'runs.db'}"  # absolute: four slashes
    again = open_store(store.url)
    assert isinstance(again, SqliteStore)
    assert again.path == str(tmp_path / "runs.db")
