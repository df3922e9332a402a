"""What another process learns of an S3 store's runs: who holds each, and whether its data is sound.

The owner is the lease's, alive while the lease has not run out; data sealed
with a key the reader was not given is listed as sealed and verified by
checksum without being opened.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
from structlog.testing import capture_logs

from actorflow.storage._capabilities import ClaimInfo
from actorflow.storage._records import RunManifest, Snapshot, StepRecord
from actorflow.storage._sealing import Codec
from tests.storage.factories_s3 import KEY, open_s3_store, sibling

if TYPE_CHECKING:
    from tests.storage.s3_servers import S3Server


def manifest(run_id: str = "run-1", **kw: Any) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="wf", input=b"\x90", input_hash="h", **kw)


def step(i: int) -> StepRecord:
    return StepRecord(step_id=f"main/{i}", kind="ask", target="a", result=b"r%d" % i)


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    result: S3Server = request.getfixturevalue(request.param)
    return result


async def test_the_lease_names_its_owner_alive_until_it_runs_out(server: S3Server) -> None:
    store = open_s3_store(server, lease_ttl=60.0)
    other = sibling(store, server)
    stalled = sibling(store, server, lease_ttl=0.0)
    try:
        await store.create_run(manifest())
        before = time.time()
        await store.claim("run-1", "host:12:tag")
        seen = await other.read_claim("run-1")
        assert (seen.owner, seen.alive) == ("host:12:tag", True)
        assert seen.expires is not None
        assert before + 60.0 <= seen.expires <= time.time() + 60.0
        await store.create_run(manifest("run-2"))
        await stalled.claim("run-2", "host:13:tag")  # a lease that ran out at once
        lapsed = await other.read_claim("run-2")
        assert (lapsed.owner, lapsed.alive) == ("host:13:tag", False)
    finally:
        for s in (store, other, stalled):
            await s.aclose()


async def test_without_the_key_runs_are_sealed_and_their_checksums_verified(
    server: S3Server,
) -> None:
    store = open_s3_store(server, Codec(keys={"k1": KEY}, compress_above=64))
    reader = open_s3_store(server, prefix=store.prefix)  # another process, without the key
    try:
        await store.create_run(manifest())
        await store.claim("run-1", "host:12:tag")
        await store.put_blob("run-1", b"a state " * 20)
        await store.append("run-1", [step(0), step(1)])
        await store.append("run-1", [step(2)])
        await store.write_snapshot(
            Snapshot(run_id="run-1", snapshot_id="s1", position=3, created=0.0, trigger="t")
        )
        with capture_logs():
            assert await reader.list_runs() == []
            [entry] = await reader.list_unreadable()
        assert (entry.run_id, entry.key_id) == ("run-1", "k1")
        assert await reader.read_claim("run-1") == ClaimInfo()  # the lease is sealed too
        check = await reader.check_sealed("run-1")
        assert (check.records, check.snapshots, check.blobs, check.other) == (3, 1, 1, 2)
        assert check.encrypted == 7
        assert check.problems == []
        client = server.client()
        [snap] = [
            o["Key"]
            for o in client.list_objects_v2(
                Bucket=server.bucket, Prefix=f"{store.prefix}runs/run-1/snapshots/"
            )["Contents"]
        ]
        body = bytearray(client.get_object(Bucket=server.bucket, Key=snap)["Body"].read())
        body[-1] ^= 0xFF
        client.put_object(Bucket=server.bucket, Key=snap, Body=bytes(body))
        damaged = await reader.check_sealed("run-1")
        assert damaged.problems == [(f"s3://{server.bucket}/{snap}", "sha256 checksum mismatch")]
    finally:
        await store.aclose()
        await reader.aclose()
