"""LogWriter: synchronous add, group commit, failures kept for retry, followers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow.errors import EncodingError, StorageError
from actorflow.storage import EventRecord, LogWriter, MemoryStore, RunManifest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import LogRecord


class GatedStore(MemoryStore):
    """A MemoryStore whose appends wait for a gate and can be told to fail."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()
        self.fail_next = False
        self.batches: list[int] = []

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise StorageError("append", "disk full")
        self.batches.append(len(records))
        return await super().append(run_id, records)


def rec(i: int) -> EventRecord:
    return EventRecord(kind=f"e{i}")


async def new_store() -> GatedStore:
    store = GatedStore()
    await store.create_run(RunManifest(run_id="r", workflow="w", input=b"", input_hash=""))
    return store


async def test_add_returns_positions_and_flush_makes_them_durable() -> None:
    store = await new_store()
    await store.append("r", [rec(0)])
    writer = LogWriter(store, "r", start=1)
    assert [writer.add(rec(i)) for i in (1, 2, 3)] == [1, 2, 3]
    assert writer.durable == 1
    assert await writer.flush(through=3) >= 3
    assert writer.durable == 4
    assert await store.read_log("r") == [rec(i) for i in range(4)]


async def test_concurrent_flushers_share_appends() -> None:
    store = await new_store()
    writer = LogWriter(store, "r", start=0)
    store.gate = anyio.Event()
    writer.add(rec(0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.flush)
        await store.entered.wait()  # the first append is in flight, holding one record
        for i in range(1, 50):
            writer.add(rec(i))
            tg.start_soon(writer.flush)
        await anyio.wait_all_tasks_blocked()
        store.gate.set()
    assert store.batches == [1, 49]
    assert writer.appends == 2
    assert await store.read_log("r") == [rec(i) for i in range(50)]


async def test_a_failed_append_reaches_every_waiter_and_loses_nothing() -> None:
    store = await new_store()
    writer = LogWriter(store, "r", start=0)
    store.gate = anyio.Event()
    store.fail_next = True
    errors: list[BaseException] = []

    async def flush(through: int | None = None) -> None:
        try:
            await writer.flush(through)
        except StorageError as exc:
            errors.append(exc)

    writer.add(rec(0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(flush)
        await store.entered.wait()
        tg.start_soon(flush)
        tg.start_soon(flush, 1)
        await anyio.wait_all_tasks_blocked()
        store.gate.set()
    assert len(errors) == 3
    assert all("disk full" in str(e) and "records kept" in str(e) for e in errors)
    assert writer.durable == 0
    writer.add(rec(1))
    assert await writer.flush() == 2
    assert await store.read_log("r") == [rec(0), rec(1)]


async def test_follower_waits_until_durable() -> None:
    store = await new_store()
    writer = LogWriter(store, "r", start=0)
    seen: list[int] = []

    async def follower() -> None:
        await writer.wait_durable(2)
        seen.append(writer.durable)

    async with anyio.create_task_group() as tg:
        tg.start_soon(follower)
        writer.add(rec(0))
        await writer.flush()
        await anyio.wait_all_tasks_blocked()
        assert seen == []
        writer.add(rec(1))
        await writer.flush()
    assert seen == [2]


async def test_a_record_that_cannot_encode_is_refused_at_add() -> None:
    writer = LogWriter(await new_store(), "r", start=0)
    with pytest.raises(EncodingError):
        writer.add(EventRecord(kind="x", data=object()))  # type: ignore[arg-type]
    assert writer.position == 0


async def test_another_writer_on_the_same_log_is_detected() -> None:
    store = await new_store()
    writer = LogWriter(store, "r", start=0)
    await store.append("r", [rec(9)])
    writer.add(rec(0))
    with pytest.raises(StorageError, match="another process wrote to it"):
        await writer.flush()
