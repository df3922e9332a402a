"""A SqliteStore's tables, its schema version, and what opening a file checks.

Every table is plain: run ids, positions, sizes and times as columns a person
can query with the ``sqlite3`` shell, and the stored objects (manifests, log
records, blobs, snapshots, inbox entries, event batches, claims, schedules)
as the sealed bytes every store writes (:class:`~actorflow.storage.Codec`),
so nothing of a run is readable there without the store's key when it is
encrypted.

``meta`` holds ``schema_version``, and ``synced``, which a durable commit
that would write nothing counts up (:mod:`._db`). Opening a file creates the tables in an
empty one; a file written by a newer actorflow (a higher version), one that
is no SQLite database, and an SQLite database without these tables are
refused with :class:`~actorflow.errors.StoreSchemaError`, changing nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from actorflow.errors import StoreSchemaError

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SCHEMA_VERSION", "TABLES", "check_schema", "row"]

SCHEMA_VERSION: Final = 1
"""The schema this actorflow writes; a file with a higher one is refused."""

_SCHEMA: Final = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    run_id    TEXT PRIMARY KEY,
    manifest  BLOB NOT NULL,
    log_start INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE unfinished (
    run_id TEXT PRIMARY KEY
);
CREATE TABLE log (
    run_id   TEXT NOT NULL,
    position INTEGER NOT NULL,
    record   BLOB NOT NULL,
    PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE TABLE blobs (
    run_id  TEXT NOT NULL,
    address TEXT NOT NULL,
    durable INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (run_id, address)
);
CREATE TABLE snapshots (
    run_id      TEXT NOT NULL,
    snapshot_id TEXT NOT NULL,
    name        TEXT,
    position    INTEGER NOT NULL,
    created     REAL NOT NULL,
    durable     INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (run_id, snapshot_id)
);
CREATE TABLE inbox (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    id_key TEXT NOT NULL,
    entry  BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE UNIQUE INDEX inbox_ids ON inbox (run_id, id_key);
CREATE TABLE events (
    run_id TEXT NOT NULL,
    first  INTEGER NOT NULL,
    count  INTEGER NOT NULL,
    ended  INTEGER NOT NULL,
    batch  BLOB NOT NULL,
    PRIMARY KEY (run_id, first)
);
CREATE TABLE claims (
    run_id TEXT PRIMARY KEY,
    epoch  INTEGER NOT NULL,
    lease  BLOB NOT NULL
);
CREATE TABLE schedules (
    schedule_id TEXT PRIMARY KEY,
    definition  BLOB NOT NULL,
    progress    BLOB
);
CREATE TABLE limits (
    key    TEXT PRIMARY KEY,
    window BLOB NOT NULL
);
"""

TABLES: Final = (
    "meta",
    "runs",
    "unfinished",
    "log",
    "blobs",
    "snapshots",
    "inbox",
    "events",
    "claims",
    "schedules",
    "limits",
)
"""Every table of the schema."""

_KNOWN = f"actorflow SQLite schema {SCHEMA_VERSION}"


def check_schema(conn: sqlite3.Connection, location: str, *, create: bool = True) -> None:
    """Create the schema in an empty database (with ``create``), or check the one there.

    Runs outside any transaction.

    Raises:
        StoreSchemaError: a newer actorflow's schema, or a database that is
            not an actorflow store (nothing is changed in either).
        sqlite3.DatabaseError: the file is not an SQLite database.
    """
    conn.execute("BEGIN IMMEDIATE" if create else "BEGIN")
    try:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if not names and not create:
            conn.execute("ROLLBACK")
            raise StoreSchemaError(
                location,
                "none (an empty file, which this process may not write)",
                _KNOWN,
                "give this process write access to it, or point the store at an actorflow store",
            )
        if not names:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("COMMIT")
            return
        version = None
        if "meta" in names:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = row[0] if row is not None else None
        conn.execute("ROLLBACK")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if version is None or not str(version).isdigit():
        tables = ", ".join(sorted(n for n in names if not n.startswith("sqlite_"))) or "none"
        raise StoreSchemaError(
            location,
            f"none (an SQLite database that is not an actorflow store; its tables: {tables})",
            _KNOWN,
            "point the store at an actorflow store's file, or at a new file's path",
        )
    if int(version) > SCHEMA_VERSION:
        raise StoreSchemaError(
            location,
            f"actorflow SQLite schema {version}",
            _KNOWN,
            "a newer actorflow wrote it: upgrade actorflow in this process "
            "(nothing in the file was changed)",
        )


def row(
    location: str, table: str, run_id: str, key: str | None = None, value: object = None
) -> str:
    """Where one row is, as errors and ``actorflow validate`` name it.

    ``runs.db: log row (run 'r1', position 3)``.
    """
    if key is None:
        return f"{location}: {table} row (run {run_id!r})"
    return f"{location}: {table} row (run {run_id!r}, {key} {value!r})"
