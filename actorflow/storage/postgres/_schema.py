"""The tables a PostgresStore keeps, created and migrated by the store itself.

Every table lives in the store's schema (``actorflow`` by default) and holds
sealed bytes (``bytea``): the same envelopes, checksums, compression and
encryption as the file and S3 stores, so a run's data moves between stores
unchanged. The schema's version is a row of ``af_meta``; a store refuses a
schema a newer actorflow wrote (``StoreSchemaError``) and upgrades an older one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from actorflow.errors import ConfigurationError, StoreSchemaError

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "migrate", "validate_schema_name"]

SCHEMA_VERSION: Final = 1
"""The schema this actorflow writes; a store with a higher one is refused."""

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_TABLES: Final = (
    # one row per run: the sealed manifest, and the counters every write takes in its
    # transaction (the log's ends, the inbox's end, the claim's epoch and last owner)
    """CREATE TABLE af_runs (
        run_id text PRIMARY KEY,
        created_order bigserial NOT NULL,
        lock_key bigint NOT NULL,
        manifest bytea NOT NULL,
        version bigint NOT NULL DEFAULT 0,
        log_start bigint NOT NULL DEFAULT 0,
        log_end bigint NOT NULL DEFAULT 0,
        inbox_end bigint NOT NULL DEFAULT 0,
        epoch bigint NOT NULL DEFAULT 0,
        owner text
    )""",
    "CREATE TABLE af_unfinished (run_id text PRIMARY KEY)",
    # batch: a random id on an append's first record, to find it again after a
    # connection lost mid-commit (the append landed, or it did not)
    """CREATE TABLE af_log (
        run_id text NOT NULL,
        position bigint NOT NULL,
        batch uuid,
        data bytea NOT NULL,
        PRIMARY KEY (run_id, position)
    )""",
    """CREATE TABLE af_blobs (
        run_id text NOT NULL,
        address text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (run_id, address)
    )""",
    """CREATE TABLE af_snapshots (
        run_id text NOT NULL,
        snapshot_id text NOT NULL,
        info bytea NOT NULL,
        data bytea NOT NULL,
        durable boolean NOT NULL DEFAULT true,
        PRIMARY KEY (run_id, snapshot_id)
    )""",
    """CREATE TABLE af_inbox (
        run_id text NOT NULL,
        seq bigint NOT NULL,
        entry_id text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (run_id, seq),
        UNIQUE (run_id, entry_id)
    )""",
    """CREATE TABLE af_events (
        id bigserial PRIMARY KEY,
        run_id text NOT NULL,
        first bigint NOT NULL,
        count integer NOT NULL,
        ended boolean NOT NULL,
        data bytea NOT NULL
    )""",
    "CREATE INDEX af_events_run ON af_events (run_id, id)",
    "CREATE TABLE af_limits (key text PRIMARY KEY, starts bytea NOT NULL)",
    "CREATE TABLE af_schedules (schedule_id text PRIMARY KEY, data bytea NOT NULL)",
    "CREATE TABLE af_schedule_progress (schedule_id text PRIMARY KEY, data bytea NOT NULL)",
    # when a timed queue slot's minute ends (its advisory lock says who holds it now)
    """CREATE TABLE af_queue_ends (
        queue text NOT NULL,
        idx integer NOT NULL,
        until double precision NOT NULL,
        PRIMARY KEY (queue, idx)
    )""",
)


def validate_schema_name(schema: str) -> str:
    """``schema`` if it is a plain lower-case PostgreSQL name (used unquoted).

    Raises:
        ConfigurationError: it is not.
    """
    if not isinstance(schema, str) or not _NAME.fullmatch(schema):
        raise ConfigurationError(
            "PostgresStore schema",
            schema,
            "a lower-case name of letters, digits and underscores (at most 63)",
        )
    return schema


def migrate(conn: psycopg.Connection[tuple[object, ...]], schema: str, location: str) -> None:
    """Create the store's schema and tables, or check (and upgrade) the ones there.

    Runs in one transaction under an advisory lock, so stores opening at once
    create it once.

    Raises:
        StoreSchemaError: a newer actorflow wrote the schema, or it holds
            tables that are not an actorflow store's, or the role may not create it.
    """
    import psycopg.errors

    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"actorflow:{schema}",))
            exists = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
            ).fetchone()
            if exists is None:
                conn.execute(f"CREATE SCHEMA {schema}")
            meta = conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = 'af_meta'",
                (schema,),
            ).fetchone()
            if meta is None:
                others = conn.execute(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
                    (schema,),
                ).fetchone()
                if others is not None and int(str(others[0])) > 0:
                    raise StoreSchemaError(
                        location,
                        "none (tables that are not an actorflow store's)",
                        str(SCHEMA_VERSION),
                        f"schema {schema!r} holds other tables: give the store a schema of "
                        "its own (PostgresStore(dsn, schema=...) or ?schema=... in the URL)",
                    )
                conn.execute(
                    f"CREATE TABLE {schema}.af_meta (key text PRIMARY KEY, value text NOT NULL)"
                )
                conn.execute(f"SET LOCAL search_path TO {schema}")
                for ddl in _TABLES:
                    conn.execute(ddl)
                conn.execute(
                    "INSERT INTO af_meta (key, value) VALUES ('schema_version', %s)",
                    (str(SCHEMA_VERSION),),
                )
                return
            row = conn.execute(
                f"SELECT value FROM {schema}.af_meta WHERE key = 'schema_version'"
            ).fetchone()
            found = str(row[0]) if row is not None else "none"
            if not found.isdigit() or int(found) > SCHEMA_VERSION:
                raise StoreSchemaError(
                    location,
                    found,
                    str(SCHEMA_VERSION),
                    "a newer actorflow wrote it: upgrade actorflow in this process "
                    "(nothing was changed)"
                    if found.isdigit()
                    else "af_meta does not say which schema it is: this is not an actorflow store",
                )
            # versions below SCHEMA_VERSION would be upgraded here, one step at a time
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreSchemaError(
            location,
            "none (the role may not create it)",
            str(SCHEMA_VERSION),
            f"the role cannot create schema {schema!r} or its tables ({exc.diag.message_primary}): "
            f"create it once as a role that may (CREATE SCHEMA {schema} AUTHORIZATION <role>), "
            "or GRANT CREATE ON DATABASE to this role",
        ) from exc
