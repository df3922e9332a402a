"""An owner's writes on a run's path: from the event loop's thread, one commit per phase.

An owned run's appends, its creation-and-claim and its unsynced manifest
updates are sent from the event loop's thread; its snapshots and history
chunks wait to be written with its next append. These tests pin what that
must not change: what is acknowledged lands once, fenced owners write
nothing, other processes see the rows soon, and a cancelled caller never
leaves a commit halfway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest
from structlog.testing import capture_logs

from actorflow.errors import LeaseLostError, RunLockedError
from actorflow.storage import Codec, RunManifest, RunStatus
from actorflow.testing.conformance._samples import manifest, snapshot, step
from tests.storage.postgres.conftest import KEY
from tests.storage.postgres.test_store import _store, _terminate

if TYPE_CHECKING:
    from actorflow.storage.postgres import PostgresStore
    from tests.storage.pg_server import PgServer

pytestmark = pytest.mark.postgres

HOUR = 3600.0  # a delay no test waits out: only an append or a read writes the rows


def _owned(run_id: str = "run-1", owner: str = "me") -> RunManifest:
    return msgspec.structs.replace(manifest(run_id), status=RunStatus.RUNNING, owner=owner)


async def _snapshot_ids(store: PostgresStore, run_id: str = "run-1") -> list[str]:
    return [s.snapshot_id for s in await store.list_snapshots(run_id)]


async def test_a_snapshot_and_a_chunk_of_an_owned_run_travel_with_its_next_append(
    pg_server: PgServer,
) -> None:
    schema = pg_server.schema()
    async with (
        _store(pg_server, schema, snapshot_delay=HOUR) as owner,
        _store(pg_server, schema) as other,
    ):
        await owner.create_run(manifest())
        await owner.claim("run-1", "me")
        assert await owner.append("run-1", [step(0)]) == 1
        info = await owner.write_snapshot(snapshot("s1", 1))
        address = await owner.put_blob_unsynced("run-1", b"a chunk of history")
        assert not info.durable
        assert await _snapshot_ids(other) == []  # waiting, in this store only
        assert not await other.has_blob("run-1", address)
        assert await owner.append("run-1", [step(1)]) == 2  # one commit carries them
        assert await _snapshot_ids(other) == ["s1"]
        assert await other.get_blob("run-1", address) == b"a chunk of history"
        assert await other.read_snapshot("run-1", "s1") == snapshot("s1", 1)
        assert await other.read_log("run-1") == [step(0), step(1)]


async def test_the_owning_store_reads_its_waiting_rows_and_others_get_them_soon(
    pg_server: PgServer,
) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema, snapshot_delay=HOUR) as owner:
        await owner.create_run(manifest())
        await owner.claim("run-1", "me")
        await owner.append("run-1", [step(0)])
        await owner.write_snapshot(snapshot("s1", 1))
        assert await owner.read_snapshot("run-1", "s1") == snapshot("s1", 1)
    async with (
        _store(pg_server, schema, snapshot_delay=0.01) as owner,
        _store(pg_server, schema) as other,
    ):
        await owner.claim("run-1", "me")
        await owner.append("run-1", [step(1)])
        await owner.write_snapshot(snapshot("s2", 2))
        with anyio.fail_after(30):
            # written by the store's own thread, in no reach of this task: polled, bounded
            while "s2" not in await _snapshot_ids(other):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert await _snapshot_ids(other) == ["s1", "s2"]


async def test_rows_a_released_run_left_waiting_are_written_under_its_epoch(
    pg_server: PgServer,
) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema, snapshot_delay=HOUR) as owner:
        await owner.create_run(manifest())
        lease = await owner.claim("run-1", "me")
        await owner.append("run-1", [step(0)])
        await owner.write_snapshot(snapshot("s1", 1))
        await owner.release(lease)  # the run's end: nothing waits for the rows
    async with _store(pg_server, schema) as other:
        assert await _snapshot_ids(other) == ["s1"]  # the close wrote them


async def test_a_fenced_owners_waiting_rows_are_never_written(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with (
        _store(pg_server, schema, snapshot_delay=HOUR) as first,
        _store(pg_server, schema) as second,
    ):
        await first.create_run(manifest())
        await first.claim("run-1", "first")
        await first.append("run-1", [step(0)])
        await first.write_snapshot(snapshot("stale", 1))
        assert _terminate(pg_server, schema, "locks", holding=True) == 1
        with anyio.fail_after(30):
            while await second.is_owned("run-1"):  # noqa: ASYNC110  (the server's state, bounded)
                await anyio.sleep(0.01)
        await second.claim("run-1", "second")
        with pytest.raises(LeaseLostError):
            await first.append("run-1", [step(1)])
        with capture_logs():
            await first.aclose()
        assert await _snapshot_ids(second) == []
        assert await second.read_log("run-1") == [step(0)]


async def test_rows_of_an_earlier_epoch_are_dropped_not_written_under_a_new_one(
    pg_server: PgServer,
) -> None:
    schema = pg_server.schema()
    async with (
        _store(pg_server, schema, snapshot_delay=HOUR) as first,
        _store(pg_server, schema) as second,
    ):
        await first.create_run(manifest())
        lease = await first.claim("run-1", "first")
        await first.append("run-1", [step(0)])
        await first.write_snapshot(snapshot("old", 1))
        await first.release(lease)
        taken = await second.claim("run-1", "second")  # the epoch moves on meanwhile
        await second.append("run-1", [step(1)])
        await second.release(taken)
        await first.claim("run-1", "first")
        with capture_logs() as logs:
            assert await first.append("run-1", [step(2)]) == 3
            assert await _snapshot_ids(first) == []  # the read wrote them: dropped
        assert [e["event"] for e in logs] == ["postgres_deferred_writes_dropped"]
        assert logs[0]["snapshots"] == ["old"]


async def test_a_direct_append_whose_connection_died_lands_once(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema, pool_size=1) as store:
        await store.create_run(manifest())
        await store.claim("run-1", "me")
        assert await store.append("run-1", [step(0)]) == 1  # the pool's connection is open
        assert _terminate(pg_server, schema, "pool") == 1
        with capture_logs() as logs:
            assert await store.append("run-1", [step(1), step(2)]) == 3
        assert "postgres_connection_lost" in [e["event"] for e in logs]
        assert await store.read_log("run-1") == [step(0), step(1), step(2)]
        assert await store.append("run-1", [step(3)]) == 4


async def test_a_cancelled_direct_append_is_whole_or_absent_and_the_store_goes_on(
    pg_server: PgServer,
) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema, pool_size=1) as store:
        await store.create_run(manifest())
        await store.claim("run-1", "me")
        assert await store.append("run-1", [step(0)]) == 1
        for i in range(1, 6):
            with anyio.CancelScope() as scope:
                scope.cancel()  # cancelled before the statement is even sent
                await store.append("run-1", [step(i)])
            log = await store.read_log("run-1")
            assert log == [step(n) for n in range(len(log))]  # whole records, each once
        end = len(await store.read_log("run-1"))
        assert await store.append("run-1", [step(end)]) == end + 1


async def test_create_run_claims_the_run_for_its_manifests_owner(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as store, _store(pg_server, schema) as other:
        created, new = await store.create_run(_owned("run-1", "me"))
        assert new
        assert created.owner == "me"
        with pytest.raises(RunLockedError):
            await other.claim("run-1", "someone")  # taken at creation, before its claim
        lease = await store.claim("run-1", "me")
        assert lease.epoch == 1
        assert (await store.read_claim("run-1")).owner == "me"
        assert await store.append("run-1", [step(0)]) == 1
        # a second store creating the same run gets the first's manifest, and no claim
        stored, new = await other.create_run(_owned("run-1", "someone"))
        assert not new
        assert stored.owner == "me"
        with pytest.raises(RunLockedError):
            await other.claim("run-1", "someone")
        # claimed at creation for one owner, claimed by another: the claim takes it anew
        await store.create_run(_owned("run-2", "me"))
        taken = await store.claim("run-2", "another")
        assert taken.epoch == 2
        assert (await other.read_claim("run-2")).owner == "another"


async def test_an_owners_unsynced_update_ends_its_run(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with _store(pg_server, schema) as store:
        await store.create_run(_owned())
        await store.claim("run-1", "me")
        assert await store.list_unfinished() == ["run-1"]

        def done(m: RunManifest) -> RunManifest:
            return msgspec.structs.replace(m, status=RunStatus.COMPLETED, result=b"\x01")

        ended = await store.update_run("run-1", done, durable=False)
        assert ended.status is RunStatus.COMPLETED
        assert await store.read_run("run-1") == ended
        assert await store.list_unfinished() == []
        versions = await store.list_run_versions()
        again = await store.update_run("run-1", lambda m: m, durable=False)
        assert again == ended
        assert (await store.list_run_versions())["run-1"] != versions["run-1"]


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
@pytest.mark.parametrize("carrier", ["append", "update", "own commit"])
async def test_a_waiting_snapshot_whose_id_holds_another_is_said_not_dropped_silently(
    pg_server: PgServer, carrier: str, sealed: bool
) -> None:
    # an append or an unsynced update carrying the rows says it as their own commit does;
    # the same snapshot sealed twice (encrypted: other bytes) is no clash
    schema = pg_server.schema()
    codec = Codec(keys={"k1": KEY}) if sealed else Codec()
    async with (
        _store(pg_server, schema, snapshot_delay=HOUR, codec=codec) as owner,
        _store(pg_server, schema, codec=codec) as other,
    ):
        await owner.create_run(manifest())
        await owner.claim("run-1", "me")
        await owner.append("run-1", [step(0)])
        await owner.write_snapshot(snapshot("s1", 1))
        await owner.append("run-1", [step(1)])  # s1 rides with it
        await owner.write_snapshot(snapshot("s1", 2))  # another checkpoint with s1's id
        await owner.write_snapshot(snapshot("s2", 2))
        await owner.write_snapshot(snapshot("s2", 2))  # the same one again: nothing to say
        with capture_logs() as logs:
            if carrier == "append":
                assert await owner.append("run-1", [step(2)]) == 3
            elif carrier == "update":
                await owner.update_run("run-1", lambda m: m, durable=False)
            else:
                await owner.list_snapshots("run-1")  # written first, in a commit of their own
        assert logs == [
            {
                "event": "postgres_checkpoint_id_taken",
                "log_level": "warning",
                "run_id": "run-1",
                "snapshot_id": "s1",
                "error": "the run already holds a different checkpoint with this id; "
                "this one was not written",
            }
        ]
        assert await _snapshot_ids(other) == ["s1", "s2"]  # they rode in the statement
        assert await other.read_snapshot("run-1", "s1") == snapshot("s1", 1)  # the first kept
