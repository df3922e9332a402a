"""S3 queue slots: held while the holder's worker lease lives, taken over once it lapses."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from actorflow.errors import LeaseLostError, RunLockedError
from actorflow.storage import RunManifest, StepRecord
from tests.storage.factories_s3 import open_s3_store

if TYPE_CHECKING:
    from tests.storage.s3_servers import S3Server


async def test_a_slot_is_held_while_its_worker_lives_and_taken_over_once_it_lapses(
    seaweed_server: S3Server,
) -> None:
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    live = open_s3_store(seaweed_server, prefix=prefix)
    other = open_s3_store(seaweed_server, prefix=prefix)
    stalled = open_s3_store(seaweed_server, prefix=prefix, lease_ttl=0.0)  # lapses at once
    try:
        held = await live.take_queue_slot("reports", 1, "live")
        assert held is not None
        assert await other.take_queue_slot("reports", 1, "other") is None  # a live holder
        await live.release_queue_slot(held)
        lapsed = await stalled.take_queue_slot("reports", 1, "stalled")
        assert lapsed is not None
        taken = await other.take_queue_slot("reports", 1, "other")  # its holder's lease lapsed
        assert taken is not None
        await stalled.release_queue_slot(lapsed)  # too late: the slot is another's now
        assert await live.take_queue_slot("reports", 1, "live") is None
    finally:
        for store in (live, other, stalled):
            await store.aclose()


async def test_a_run_whose_slot_was_taken_while_its_worker_stalled_stops_at_its_next_write(
    seaweed_server: S3Server,
) -> None:
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    stalled = open_s3_store(seaweed_server, prefix=prefix, lease_ttl=0.0)  # lapses at once
    other = open_s3_store(seaweed_server, prefix=prefix)
    try:
        await stalled.create_run(RunManifest(run_id="r", workflow="W", input=b"", input_hash=""))
        await stalled.claim("r", "stalled")
        slot = await stalled.take_queue_slot("reports", 1, "stalled")
        assert slot is not None
        await stalled.bind_queue_slot(slot, "r")  # r runs under the queue's one slot
        # the stalled worker's lease ran out: another worker takes the slot for another run
        assert await other.take_queue_slot("reports", 1, "other") is not None
        # the stalled worker wakes: its run must not go on beside the other's
        with pytest.raises(LeaseLostError):
            await stalled.append("r", [StepRecord(step_id="0", kind="ask")])
    finally:
        for store in (stalled, other):
            await store.aclose()


async def test_a_run_whose_slot_is_still_its_workers_goes_on_after_a_lapse(
    seaweed_server: S3Server,
) -> None:
    store = open_s3_store(seaweed_server, lease_ttl=0.0)  # lapses at once, nobody takes over
    try:
        await store.create_run(RunManifest(run_id="r", workflow="W", input=b"", input_hash=""))
        await store.claim("r", "w")
        slot = await store.take_queue_slot("reports", 1, "w")
        assert slot is not None
        await store.bind_queue_slot(slot, "r")
        assert await store.append("r", [StepRecord(step_id="0", kind="ask")]) >= 0
        await store.release_queue_slot(slot)
    finally:
        await store.aclose()


async def test_a_run_whose_slot_was_taken_before_its_claim_is_not_claimed(
    seaweed_server: S3Server,
) -> None:
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    stalled = open_s3_store(seaweed_server, prefix=prefix, lease_ttl=0.0)  # lapses at once
    other = open_s3_store(seaweed_server, prefix=prefix)
    try:
        await stalled.create_run(RunManifest(run_id="r", workflow="W", input=b"", input_hash=""))
        slot = await stalled.take_queue_slot("reports", 1, "stalled")
        assert slot is not None
        await stalled.bind_queue_slot(slot, "r")  # chosen to run under the slot, not claimed yet
        assert await other.take_queue_slot("reports", 1, "other") is not None
        with pytest.raises(RunLockedError):  # it stalled: the run waits for another slot
            await stalled.claim("r", "stalled")
        assert (await other.claim("r", "other")).owner == "other"  # for a worker with a slot
    finally:
        for store in (stalled, other):
            await store.aclose()
