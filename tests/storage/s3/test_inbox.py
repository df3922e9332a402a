"""The S3 store's inbox between processes: seqs taken by others, half-done posts, duplicates.

The conformance suite covers the ``SupportsInbox`` contract on S3; these
tests play the other processes by writing objects beside a store (a sibling
store, or the bucket's client directly).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
from structlog.testing import capture_logs

from actorflow.storage._inbox import InboxEntry, id_key, seal_entry
from actorflow.storage._records import RunManifest
from tests.storage.factories_s3 import open_s3_store, sibling

if TYPE_CHECKING:
    from actorflow.storage.s3._store import S3Store
    from tests.storage.s3_servers import S3Server


def manifest(run_id: str = "run-1", **kw: Any) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="wf", input=b"\x90", input_hash="h", **kw)


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    result: S3Server = request.getfixturevalue(request.param)
    return result


async def _post(store: S3Store, entry_id: str) -> InboxEntry:
    return await store.post("run-1", entry_id=entry_id, type="Msg", payload=entry_id.encode())


def _key(store: S3Store, *parts: str) -> str:
    return store._objects.key("run-1", *parts)


async def test_a_seq_taken_by_another_writer_pushes_the_post_to_the_next(
    server: S3Server,
) -> None:
    store = open_s3_store(server)
    other = sibling(store, server)
    try:
        await store.create_run(manifest())
        assert (await _post(store, "m0")).seq == 0  # this store now expects the end at 1
        assert (await _post(other, "m1")).seq == 1
        taken = await _post(store, "m2")  # tries 1 (its hint), meets m1, takes 2
        assert taken.seq == 2
        assert [e.entry_id for e in await other.read_inbox("run-1")] == ["m0", "m1", "m2"]
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_claimed_id_without_an_entry_is_posted_by_the_retry(server: S3Server) -> None:
    store = open_s3_store(server)
    try:
        await store.create_run(manifest())
        # a poster that died between its claim and its entry
        claim = _key(store, "inbox-ids", id_key(store.codec, "lost"))
        await store._objects.put("test", claim, b"", token="dead")
        entry = await _post(store, "lost")
        assert entry.seq == 0
        assert await store.read_inbox("run-1") == [entry]
        assert await _post(store, "lost") == entry  # and from now on, found
    finally:
        await store.aclose()


async def test_an_id_stored_twice_reads_once_from_any_start(server: S3Server) -> None:
    store = open_s3_store(server)
    reader = sibling(store, server)
    try:
        await store.create_run(manifest())
        first = await _post(store, "twice")
        # a racing retry in another process, which found no entry and appended its own
        again = InboxEntry(seq=1, entry_id="twice", type="Msg", payload=b"", sent=time.time())
        await store._objects.put(
            "test",
            _key(store, "inbox", f"{1:020d}"),
            seal_entry(store.codec, again, run_id="run-1"),
            token="racer",
        )
        after = await _post(store, "after")
        assert after.seq == 2
        assert await reader.read_inbox("run-1", 1) == [after]  # knows seq 0 held the id
        assert await store.read_inbox("run-1") == [first, after]
        assert await _post(reader, "twice") == first
    finally:
        await store.aclose()
        await reader.aclose()


async def test_a_damaged_entry_is_skipped_and_found_by_the_checks(server: S3Server) -> None:
    store = open_s3_store(server)
    try:
        await store.create_run(manifest())
        first = await _post(store, "m0")
        await _post(store, "m1")
        assert (await store.check_sealed("run-1")).other == 3  # the manifest and two entries
        key = _key(store, "inbox", f"{1:020d}")
        client = server.client()
        body = bytearray(client.get_object(Bucket=server.bucket, Key=key)["Body"].read())
        body[-1] ^= 0xFF
        client.put_object(Bucket=server.bucket, Key=key, Body=bytes(body))
        with capture_logs() as logs:
            assert await store.read_inbox("run-1") == [first]
            later = await _post(store, "m2")
            assert later.seq == 2
            assert await store.read_inbox("run-1", 1) == [later]
        [warning] = [e for e in logs if e["event"] == "inbox_entry_damaged"]
        assert warning["location"] == f"s3://{server.bucket}/{key}"
        check = await store.check_sealed("run-1")
        assert check.problems == [(f"s3://{server.bucket}/{key}", "sha256 checksum mismatch")]
        inbox = await store.check_inbox("run-1")
        assert (inbox.entries, inbox.damaged) == (
            3,
            [(f"s3://{server.bucket}/{key}", "sha256 checksum mismatch")],
        )
    finally:
        await store.aclose()
