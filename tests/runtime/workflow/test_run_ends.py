"""What a run's caller learns: an input that cannot fit, an end the manifest could not take."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.errors import RunEndNotStoredError, RunInputTypeError, StorageError
from actorflow.storage import EventRecord, MemoryStore, RunManifest, RunStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage import LogRecord


class Count(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        return n + int(await ctx.random() >= 0)


class Broken(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        await ctx.random()
        raise ValueError("no such thing")


class ManifestEndFails(MemoryStore):
    """A memory store whose manifest write of a finished status fails (once armed)."""

    armed = True

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        current = await self.read_run(run_id)
        if self.armed and change(current).status.finished:
            raise StorageError("update run", "the disk is full")
        return await super().update_run(run_id, change, durable=durable)


@pytest.mark.parametrize(
    ("workflow", "status"), [(Count, RunStatus.COMPLETED), (Broken, RunStatus.FAILED)]
)
async def test_a_durable_end_whose_manifest_write_fails_is_a_storage_error_with_its_status(
    workflow: type[Orchestrator], status: RunStatus
) -> None:
    store = ManifestEndFails()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(workflow, 1, run_id="ended")
        with pytest.raises(RunEndNotStoredError) as caught:
            await handle.result()
        assert handle.status is status, "the end record decides"
        with pytest.raises(RunEndNotStoredError):
            await runtime.run(workflow, 1, run_id="ended-too")
    error = caught.value
    assert isinstance(error, StorageError)
    assert (error.run_id, error.status) == ("ended", status)
    assert "the disk is full" in str(error)
    assert "recover" in str(error)
    store.armed = False
    async with Runtime(store=store) as runtime:
        recovered = await runtime.recover("ended")
    if status is RunStatus.COMPLETED:
        assert recovered == {"ended": 2}
    assert (await store.read_run("ended")).status is status


class EndAppendFails(MemoryStore):
    """A memory store that cannot append a run's end record (once armed)."""

    armed = True

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        if self.armed and any(isinstance(r, EventRecord) and r.kind == "run_end" for r in records):
            raise StorageError("append log", "the disk is full")
        return await super().append(run_id, records)


class PauseNotStored(MemoryStore):
    """A memory store whose manifest cannot say a run paused."""

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        if change(await self.read_run(run_id)).status is RunStatus.PAUSED:
            raise StorageError("update run", "the disk is full")
        return await super().update_run(run_id, change, durable=durable)


class Asks(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        return await ctx.wait_for_input("go on?")


async def test_an_end_that_cannot_be_logged_leaves_the_run_unfinished_for_recover() -> None:
    store = EndAppendFails()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Count, 1, run_id="unlogged")
        with pytest.raises(StorageError, match="the disk is full") as caught:
            await handle.result()
        assert not isinstance(caught.value, RunEndNotStoredError)
        assert handle.status is RunStatus.RUNNING, "no end is durable: the run did not end"
    assert (await store.read_run("unlogged")).status is RunStatus.RUNNING
    store.armed = False
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {"unlogged": 2}


async def test_a_pause_the_manifest_cannot_take_is_a_storage_error() -> None:
    store = PauseNotStored()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Asks, None, run_id="unpaused")
        with pytest.raises(StorageError, match="the disk is full"):
            await handle.result()
        assert handle.status is RunStatus.RUNNING
    assert (await store.read_run("unpaused")).status is RunStatus.RUNNING


class Order(msgspec.Struct, frozen=True):
    item: str
    count: int


class Shop(Orchestrator):
    async def run(self, ctx: RunContext, order: Order) -> str:
        return f"{order.count} x {order.item}"


async def test_an_input_of_the_wrong_type_is_refused_before_anything_is_stored() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunInputTypeError) as caught:
            await runtime.start(Shop, "two apples", run_id="typo")
        with pytest.raises(RunInputTypeError):
            await runtime.run(Shop, {"item": "apple"}, run_id="short")
        with pytest.raises(RunInputTypeError):
            await runtime.submit(Shop, 2, run_id="queued")
        assert await runtime.runs() == [], "nothing was stored"
        # what decodes as the declared type is fine, as the run itself would read it
        assert await runtime.run(Shop, {"item": "apple", "count": 2}) == "2 x apple"
    error = caught.value
    assert isinstance(error, TypeError)
    assert (error.run_id, error.expected, error.given) == ("typo", "Order", "str")
    assert "Shop takes Order as its input, not str" in str(error)
    assert "validate" not in str(error)
