"""PostgresStore's own promises: bad DSNs, schemas, lost connections, claims across stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from actorflow.errors import (
    LeaseLostError,
    RunLockedError,
    StoreSchemaError,
    StoreUnavailableError,
)
from actorflow.storage import Schedule, open_store
from actorflow.testing.conformance._samples import manifest, snapshot, step
from tests.storage.s3_servers import _free_port

if TYPE_CHECKING:
    from actorflow.storage.postgres import PostgresStore
    from tests.storage.pg_server import PgServer

pytestmark = pytest.mark.postgres


def _store(server: PgServer, schema: str, **options: object) -> PostgresStore:
    from actorflow.storage.postgres import PostgresStore

    return PostgresStore(server.dsn(), schema=schema, **options)  # type: ignore[arg-type]


def _terminate(
    server: PgServer, schema: str, purpose: str, *, waiting: bool = False, holding: bool = False
) -> int:
    """Terminate the store's backends of one purpose (``pool``, ``locks``, ``listen``).

    ``waiting``: only those waiting for a lock; ``holding``: only those holding an
    advisory lock (a claim).
    """
    extra = " AND wait_event_type = 'Lock'" if waiting else ""
    if holding:
        extra += " AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')"
    rows = server.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE application_name = 'actorflow {schema} {purpose}'{extra}"
    )
    return len(rows)


async def test_a_dsn_that_does_not_connect_is_named_after_a_bounded_retry() -> None:
    from actorflow.storage.postgres import PostgresStore

    port = _free_port()  # nothing listens there
    store = PostgresStore(
        f"postgresql://nobody:secret@127.0.0.1:{port}/db", connect_attempts=2, connect_timeout=1
    )
    with anyio.fail_after(30), pytest.raises(StoreUnavailableError) as info:
        await store.read_run("run-1")
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "secret" not in str(info.value)  # the password is never shown
    assert "2 attempts" in str(info.value)
    await store.aclose()


async def test_open_store_takes_postgres_urls_with_a_schema(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    for scheme in ("postgresql", "postgres"):
        url = pg_server.dsn().replace("postgresql", scheme, 1) + f"?schema={schema}"
        store = open_store(url)
        try:
            await store.create_run(manifest(f"run-{scheme}"))
            assert getattr(store, "schema", None) == schema
        finally:
            await store.aclose()
    rows = pg_server.sql(f"SELECT run_id FROM {schema}.af_runs ORDER BY run_id")
    assert rows == [("run-postgres",), ("run-postgresql",)]


async def test_a_schema_written_by_a_newer_actorflow_is_refused(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as store:
        await store.create_run(manifest())
    pg_server.sql(f"UPDATE {schema}.af_meta SET value = '99' WHERE key = 'schema_version'")
    async with _store(pg_server, schema) as newer:
        with pytest.raises(StoreSchemaError, match="newer actorflow") as info:
            await newer.read_run("run-1")
    assert info.value.found == "99"


async def test_a_schema_of_other_tables_is_refused(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    pg_server.sql(f"CREATE SCHEMA {schema}")
    pg_server.sql(f"CREATE TABLE {schema}.customers (id int)")
    async with _store(pg_server, schema) as store:
        with pytest.raises(StoreSchemaError, match="other tables"):
            await store.list_runs()


async def test_a_role_that_may_not_create_the_schema_gets_advice(pg_server: PgServer) -> None:
    from actorflow.storage.postgres import PostgresStore

    role = pg_server.schema()  # a fresh name
    pg_server.sql(f"CREATE ROLE {role} LOGIN")
    store = PostgresStore(
        f"postgresql://{role}@127.0.0.1:{pg_server.port}/postgres", schema=pg_server.schema()
    )
    async with store:
        with pytest.raises(StoreSchemaError, match=r"CREATE SCHEMA \S+ AUTHORIZATION"):
            await store.list_runs()


async def test_a_connection_lost_mid_transaction_appends_once(pg_server: PgServer) -> None:
    """The append's backend is killed while it waits inside its transaction: it goes on
    after reconnecting, and every record is in the log once."""
    import psycopg

    schema = pg_server.schema()
    async with _store(pg_server, schema, pool_size=1) as store:
        await store.create_run(manifest())
        assert await store.append("run-1", [step(0)]) == 1
        blocker = await anyio.to_thread.run_sync(
            lambda: psycopg.connect(pg_server.dsn(), autocommit=False)
        )
        try:
            blocker.execute(f"SELECT 1 FROM {schema}.af_runs WHERE run_id = 'run-1' FOR UPDATE")
            async with anyio.create_task_group() as tg:
                ends: list[int] = []

                async def append() -> None:
                    ends.append(await store.append("run-1", [step(1), step(2)]))

                tg.start_soon(append)
                with anyio.fail_after(30):
                    # the server's state is polled (no event reaches this process), bounded
                    while not _terminate(pg_server, schema, "pool", waiting=True):  # noqa: ASYNC110
                        await anyio.sleep(0.01)  # until the append waits for the row lock
                await anyio.to_thread.run_sync(blocker.rollback)
        finally:
            await anyio.to_thread.run_sync(blocker.close)
        assert ends == [3]
        assert await store.read_log("run-1") == [step(0), step(1), step(2)]
        _terminate(pg_server, schema, "pool")  # an idle pooled connection lost
        assert await store.append("run-1", [step(3)]) == 4
        assert len(await store.read_log("run-1")) == 4


async def test_a_killed_owner_frees_its_runs_and_a_fenced_one_is_refused(
    pg_server: PgServer,
) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as first, _store(pg_server, schema) as second:
        await first.create_run(manifest())
        lease = await first.claim("run-1", "first")
        with pytest.raises(RunLockedError, match="first"):
            await second.claim("run-1", "second")
        assert await second.is_owned("run-1")
        # the first's lock connection dies (its process hung, its network went): the claim is free
        assert _terminate(pg_server, schema, "locks", holding=True) == 1
        with anyio.fail_after(30):
            while await second.is_owned("run-1"):  # noqa: ASYNC110  (the server's state, bounded)
                await anyio.sleep(0.01)  # until the server has ended the session
        taken = await second.claim("run-1", "second")
        assert taken.epoch == lease.epoch + 1
        with pytest.raises(LeaseLostError):
            await first.append("run-1", [step(0)])
        with pytest.raises(LeaseLostError):
            await first.write_snapshot(snapshot("s1", 0))
        with pytest.raises(LeaseLostError):
            await first.update_run("run-1", lambda m: m)
        with pytest.raises(LeaseLostError):
            await first.renew(lease)
        assert await second.append("run-1", [step(0)]) == 1
        claim = await first.read_claim("run-1")
        assert (claim.owner, claim.alive) == ("second", True)


async def test_a_post_from_another_store_wakes_a_watch(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as owner, _store(pg_server, schema) as poster:
        await owner.create_run(manifest())
        async with owner.watch_inbox("run-1") as watch:
            await poster.post("run-1", entry_id="e1", type="Msg", payload=b"x")
            with anyio.fail_after(10):
                await watch.changed()
            # the listener's connection is lost: it reconnects and wakes every watch
            assert _terminate(pg_server, schema, "listen") == 1
            with anyio.fail_after(30):
                await watch.changed()
            await poster.post("run-1", entry_id="e2", type="Msg", payload=b"y")
            with anyio.fail_after(30):
                while len(await owner.read_inbox("run-1")) < 2:
                    await watch.changed()


async def test_queue_and_limit_slots_are_shared_across_stores(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as a, _store(pg_server, schema) as b:
        slot = await a.take_queue_slot("q", 1, "a")
        assert slot is not None
        assert await b.take_queue_slot("q", 1, "b") is None
        await a.release_queue_slot(slot)
        assert await b.take_queue_slot("q", 1, "b") is not None
        for _ in range(2):
            assert await a.take_limit("k", per_minute=3, tokens_per_minute=None, now=10.0) == 0.0
        assert await b.take_limit("k", per_minute=3, tokens_per_minute=None, now=11.0) == 0.0
        assert await b.take_limit("k", per_minute=3, tokens_per_minute=None, now=12.0) == 58.0


async def test_an_index_row_that_names_no_run_is_skipped_and_named(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as store:
        await store.create_run(manifest())
        pg_server.sql(f"INSERT INTO {schema}.af_unfinished (run_id) VALUES ('../stray')")
        assert await store.list_unfinished() == ["run-1"]
        [stray] = await store.list_unreadable()
        assert "../stray" in stray.location


async def test_a_damaged_schedule_row_is_named_and_warned_about_once(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as store:
        for schedule_id in ("good", "bad"):
            await store.put_schedule(
                Schedule(schedule_id=schedule_id, workflow="w", input=b"", every=60.0, anchor=0.0)
            )
        pg_server.sql(f"UPDATE {schema}.af_schedules SET data = 'junk' WHERE schedule_id = 'bad'")
        with capture_logs() as logs:
            for _ in range(3):  # a worker lists at every poll
                assert [s.schedule_id for s in await store.list_schedules()] == ["good"]
        assert [e["schedule_id"] for e in logs if e["event"] == "schedule_unreadable"] == ["bad"]
        [entry] = await store.list_unreadable()
        assert (entry.schedule_id, entry.run_id) == ("bad", None)
        assert entry.location.endswith("#schedules/bad")


async def test_its_url_names_its_schema_for_another_process(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as store:
        assert store.url is not None
        from actorflow.storage.postgres import PostgresStore

        again = open_store(store.url)
        try:
            assert isinstance(again, PostgresStore)
            assert again.schema == schema
        finally:
            await again.aclose()

    assert PostgresStore("host=localhost dbname=x").url is None  # a key=value DSN


def test_import_actorflow_does_not_import_psycopg() -> None:
    import subprocess
    import sys

    code = "import sys, actorflow, actorflow.storage; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
