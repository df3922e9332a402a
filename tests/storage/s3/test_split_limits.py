"""S3 limits: each process takes the budget divided by the live workers (their worker leases)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.storage import RunManifest
from tests.storage.factories_s3 import open_s3_store, sibling

if TYPE_CHECKING:
    from actorflow.storage.s3._store import S3Store
    from tests.storage.s3_servers import S3Server


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    """Each S3-compatible server the store is tested against."""
    result: S3Server = request.getfixturevalue(request.param)
    return result


async def _taken(store: S3Store, per_minute: int) -> int:
    count = 0
    while (
        await store.take_limit("api", per_minute=per_minute, tokens_per_minute=None, now=0.0) == 0
    ):
        count += 1
    return count


async def _worker(store: S3Store, run_id: str) -> None:
    """Make ``store`` a live worker: it claims a run (which writes its worker lease)."""
    await store.create_run(RunManifest(run_id=run_id, workflow="W", input=b"", input_hash=""))
    await store.claim(run_id, run_id)


async def test_three_live_workers_take_a_third_of_the_budget_each(server: S3Server) -> None:
    first = open_s3_store(server)
    stores = [first, sibling(first, server), sibling(first, server)]
    for i, store in enumerate(stores):
        await _worker(store, f"run-{i}")
    assert [await s._limits.live_workers() for s in stores] == [3, 3, 3]
    assert [await _taken(s, 60) for s in stores] == [20, 20, 20]  # 60 in all
    slots = [await stores[0].take_limit_slot("db", 6) for _ in range(3)]
    assert slots[:2] != [None, None]
    assert slots[2] is None  # two of six slots each
    for store in stores:
        await store.aclose()


async def test_a_lone_store_takes_the_whole_budget(server: S3Server) -> None:
    store = open_s3_store(server)  # no worker lease yet: it counts itself
    assert await _taken(store, 10) == 10
    await store.aclose()
