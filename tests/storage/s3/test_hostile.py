"""What another hand may leave under an S3 store's prefix (issue 23), on a real server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow.errors import LogCorruptedError
from actorflow.storage._records import EventRecord, RunManifest
from actorflow.storage._schedules import Schedule
from actorflow.storage.s3._fencing import COUNT
from tests.storage.factories_s3 import open_s3_store

if TYPE_CHECKING:
    from tests.storage.s3_servers import S3Server


async def test_a_key_in_the_index_that_is_no_run_id_is_skipped_and_reported(
    seaweed_server: S3Server,
) -> None:
    store = open_s3_store(seaweed_server)
    try:
        await store.create_run(RunManifest(run_id="r1", workflow="w", input=b"", input_hash=""))
        stray = store._objects.store_key("unfinished", "bad name")
        nested = store._objects.store_key("unfinished", "a", "b")
        client = seaweed_server.client()
        for key in (stray, nested):
            client.put_object(Bucket=seaweed_server.bucket, Key=key, Body=b"")
        with capture_logs() as logs:
            assert await store.list_unfinished() == ["r1"]
            assert await store.list_unfinished(unowned=True) == ["r1"]
            assert await store.reindex() == 0
        warned = {e["location"] for e in logs if e["event"] == "index_entry_invalid"}
        locations = {store._objects.location(k) for k in (stray, nested)}
        assert warned == locations
        assert {e.location for e in await store.list_unreadable()} == locations
    finally:
        await store.aclose()


async def test_a_log_key_that_is_no_position_is_not_a_segment_and_a_bad_start_is_named(
    seaweed_server: S3Server,
) -> None:
    store = open_s3_store(seaweed_server)
    try:
        await store.create_run(RunManifest(run_id="r1", workflow="w", input=b"", input_hash=""))
        await store.append("r1", [EventRecord(kind="e", data=b"x")])
        wire = store._objects.wire
        stray = store._objects.key("r1", "log", "²")  # a digit to isdigit(), not to int()
        await wire.call("test", "put_object", Key=stray, Body=b"")
        assert await store.read_log("r1") == [EventRecord(kind="e", data=b"x")]
        start = store._objects.key("r1", "log-start")
        await wire.call("test", "put_object", Key=start, Body=b"x1")
        with pytest.raises(LogCorruptedError, match="holds no log position"):
            await store.read_log("r1")
    finally:
        await store.aclose()


async def test_a_segment_whose_record_count_is_no_number_is_named_not_a_value_error(
    seaweed_server: S3Server,
) -> None:
    store = open_s3_store(seaweed_server)
    try:
        await store.create_run(RunManifest(run_id="r1", workflow="w", input=b"", input_hash=""))
        await store.append("r1", [EventRecord(kind="e", data=b"x")])
        segment = store._objects.key("r1", "log", f"{1:020d}")
        client = seaweed_server.client()
        client.put_object(
            Bucket=seaweed_server.bucket, Key=segment, Body=b"", Metadata={COUNT: "many"}
        )
        with pytest.raises(LogCorruptedError, match="record count"):
            await store.log_length("r1")
    finally:
        await store.aclose()


async def test_a_damaged_schedule_is_named_by_list_unreadable_and_warned_about_once(
    seaweed_server: S3Server,
) -> None:
    store = open_s3_store(seaweed_server)
    try:
        for schedule_id in ("good", "bad"):
            await store.put_schedule(
                Schedule(schedule_id=schedule_id, workflow="w", input=b"", every=60.0, anchor=0.0)
            )
        key = store._objects.store_key("schedules", "bad.schedule")
        seaweed_server.client().put_object(Bucket=seaweed_server.bucket, Key=key, Body=b"junk")
        with capture_logs() as logs:
            for _ in range(3):  # a worker lists at every poll
                assert [s.schedule_id for s in await store.list_schedules()] == ["good"]
        assert [e["schedule_id"] for e in logs if e["event"] == "schedule_unreadable"] == ["bad"]
        [entry] = await store.list_unreadable()
        assert (entry.schedule_id, entry.run_id) == ("bad", None)
        assert entry.location == store._objects.location(key)
        assert "declare it again" in entry.problem
    finally:
        await store.aclose()
