"""The S3 store's inbox watch: it polls the entry past the end, one HEAD a poll.

The conformance suite covers the contract with posts through the watching
store itself (which wake it without a request); here another store, standing
for another process, posts, so only the poll can see it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow.storage._records import RunManifest
from actorflow.storage.s3._store import S3Store
from tests.storage.factories_s3 import open_s3_store, sibling

if TYPE_CHECKING:
    from actorflow.storage.s3._wire import ObjectInfo
    from tests.storage.s3_servers import S3Server

INTERVAL = 0.05


def manifest(run_id: str = "run-1") -> RunManifest:
    return RunManifest(run_id=run_id, workflow="wf", input=b"\x90", input_hash="h")


async def test_a_post_from_another_store_is_seen_by_a_poll_of_one_head(
    seaweed_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_s3_store(seaweed_server, inbox_poll_interval=INTERVAL)
    other = sibling(store, seaweed_server)
    heads: list[str] = []
    real_head = store._objects.head

    async def counted(operation: str, key: str) -> ObjectInfo | None:
        heads.append(key)
        return await real_head(operation, key)

    monkeypatch.setattr(store._objects, "head", counted)
    try:
        await store.create_run(manifest())
        await other.post("run-1", entry_id="before", type="T", payload=b"")
        async with store.watch_inbox("run-1") as watch:
            heads.clear()
            clock = anyio.current_time()
            with anyio.move_on_after(0.3):
                await watch.changed()
                pytest.fail("changed() returned though nothing was posted since it opened")
            polls = (anyio.current_time() - clock) / INTERVAL
            assert 1 <= len(heads) <= polls + 1  # one HEAD a poll, of the next entry
            assert all(key.endswith("inbox/00000000000000000001") for key in heads)

            await other.post("run-1", entry_id="m1", type="T", payload=b"")
            with anyio.fail_after(10):
                await watch.changed()
            assert [e.entry_id for e in await store.read_inbox("run-1", 1)] == ["m1"]
    finally:
        await store.aclose()
        await other.aclose()


def test_the_poll_interval_must_be_positive() -> None:
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="inbox_poll_interval"):
            S3Store("bucket", inbox_poll_interval=bad)  # checked before any connection
