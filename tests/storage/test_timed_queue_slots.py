"""A queue's ``per_minute`` slot (``TimedQueueSlots``) counts until its minute ends, even once
its holder released it or is gone (file store: its flock; S3: its worker lease)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.storage import FileStore, MemoryStore, QueueSlots, RunManifest, TimedQueueSlots
from tests.storage.factories_s3 import open_s3_store, sibling

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store
    from tests.storage.s3_servers import S3Server

T0 = 1_800_000_000.0


@pytest.fixture(params=["memory", "file", "seaweed_server"], ids=["memory", "file", "seaweed"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Store, Store, Store]:
    """Three stores on one place, each its own process's view (its flocks, its worker lease)."""
    if request.param == "memory":
        memory = MemoryStore()  # one process: its runtimes share one store
        return memory, memory, memory
    if request.param == "file":
        return FileStore(tmp_path), FileStore(tmp_path), FileStore(tmp_path)
    server: S3Server = request.getfixturevalue(request.param)
    first = open_s3_store(server, lease_ttl=1.0)
    return first, sibling(first, server), sibling(first, server)


async def _take(store: Store, now: float) -> bool:
    assert isinstance(store, TimedQueueSlots)
    slot = await store.take_timed_queue_slot("q@rate", 1, "w", now=now, until=now + 60.0)
    return slot is not None


async def test_a_released_slot_counts_until_its_minute_ends(
    stores: tuple[Store, Store, Store],
) -> None:
    a, b, _ = stores
    assert isinstance(a, TimedQueueSlots)
    assert isinstance(a, QueueSlots)
    slot = await a.take_timed_queue_slot("q@rate", 1, "a", now=T0, until=T0 + 60.0)
    assert slot is not None
    assert not await _take(b, T0 + 1.0)  # held
    await a.release_queue_slot(slot)  # its worker stops within the minute
    assert not await _take(b, T0 + 59.0)
    assert await _take(b, T0 + 60.0)
    for store in stores:
        await store.aclose()


async def test_a_dead_holders_slot_counts_until_its_minute_ends(
    stores: tuple[Store, Store, Store],
) -> None:
    a, b, c = stores
    if a is b:
        pytest.skip("a memory store's holders live as long as it does")
    await a.create_run(RunManifest(run_id="r", workflow="W", input=b"", input_hash=""))
    assert await _take(a, T0)
    await a.aclose()  # its flock or worker lease ends without a release: as if it died
    assert not await _take(b, T0 + 59.0)
    assert await _take(c, T0 + 60.0)
    for store in (b, c):
        await store.aclose()
