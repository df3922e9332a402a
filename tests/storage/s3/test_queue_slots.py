"""S3 queue slots: held while the holder's worker lease lives, taken over once it lapses."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

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
