"""Updates: ``runtime.update`` reaches the run's ``@update`` handler and returns its reply.

A validator refuses an update before it runs (the refusal is recorded, and
final); an accepted one
runs once (its ``update_id`` makes retries harmless), as steps of its own,
and its reply is recorded, so a recovery never runs it again.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actorflow import Orchestrator, RunContext, Runtime, update
from actorflow.errors import (
    RunFinishedError,
    RunNotFoundError,
    UpdateFailedError,
    UpdateRejectedError,
)
from actorflow.storage import EventRecord, MemoryStore, RunStatus, StepRecord


class Add(msgspec.Struct, frozen=True):
    item: str


class Stall(msgspec.Struct, frozen=True):
    pass


class Done(msgspec.Struct, frozen=True):
    pass


class Never(msgspec.Struct, frozen=True):
    pass


class Unhandled(msgspec.Struct, frozen=True):
    pass


RAN: list[str] = []


def no_empty_items(self: Todo, message: Add) -> None:
    if not message.item:
        raise ValueError("an item needs a name")


class Todo(Orchestrator):
    items: list[str]

    @update(validator=no_empty_items)
    async def add(self, ctx: RunContext, message: Add) -> int:
        RAN.append(message.item)
        if message.item == "boom":
            raise RuntimeError("the handler broke")
        stamp = await ctx.now()  # a step of the update's own: update/<seq>/0
        assert stamp > 0
        self.items.append(message.item)
        return len(self.items)

    @update
    async def stall(self, ctx: RunContext, message: Stall) -> None:
        await ctx.wait_for(Never)  # never answered: the run ends first

    async def run(self, ctx: RunContext, _: None) -> list[str]:
        self.items = []
        await ctx.wait_for(Done)
        return self.items


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


async def test_an_update_gets_its_reply_once_however_often_it_is_retried() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Todo, None, run_id="todo")
        assert await runtime.update("todo", Add("milk"), update_id="u1") == 1
        assert await runtime.update("todo", Add("milk"), update_id="u1") == 1  # a retry
        assert await runtime.update("todo", Add("eggs"), result_type=int) == 2
        await runtime.signal("todo", Done())
        assert await handle.result() == ["milk", "eggs"]
    assert RAN == ["milk", "eggs"]
    log = await store.read_log("todo")
    assert [r.step_id for r in log if isinstance(r, StepRecord) and r.kind == "update"] == [
        "update/0",
        "update/2",
    ]
    assert [r.step_id for r in log if isinstance(r, StepRecord) and r.kind == "now"] == [
        "update/0/0",
        "update/2/0",
    ]
    # snapshots keep a finished update's reply, not its own steps
    final = (await store.list_snapshots("todo"))[-1]
    steps = (await store.read_snapshot("todo", final.snapshot_id)).steps
    assert {s.step_id for s in steps if s.step_id.startswith("update/")} == {"update/0", "update/2"}


async def test_rejected_and_failed_updates_are_named_errors_and_rejections_run_nothing() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Todo, None, run_id="refuse")
        with pytest.raises(UpdateRejectedError, match="an item needs a name"):
            await runtime.update("refuse", Add(""))
        with pytest.raises(UpdateRejectedError, match="no @update handler for Unhandled"):
            await runtime.update("refuse", Unhandled())
        log = await store.read_log("refuse")
        # a refusal is recorded as the update's outcome (final), and nothing ran
        assert not [r for r in log if isinstance(r, EventRecord) and "update" in r.kind]
        outcomes = [r for r in log if isinstance(r, StepRecord) and r.kind == "update"]
        assert [msgspec.msgpack.decode(r.result or b"")["rejected"] for r in outcomes] == [
            True,
            True,
        ]
        with pytest.raises(UpdateFailedError, match="the handler broke"):
            await runtime.update("refuse", Add("boom"))
        await runtime.signal("refuse", Done())
        assert await handle.result() == []
    assert RAN == ["boom"]


async def test_an_update_still_running_when_the_run_ends_fails_with_run_finished() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Todo, None, run_id="ends")
        async with anyio.create_task_group() as tg:

            async def stalled() -> None:
                with pytest.raises(RunFinishedError, match="an update cannot reach it"):
                    await runtime.update("ends", Stall())

            tg.start_soon(stalled)
            await until_accepted(store, "ends")
            await runtime.signal("ends", Done())
        assert await handle.result() == []
        with pytest.raises(RunFinishedError):
            await runtime.update("ends", Add("late"))
        with pytest.raises(RunNotFoundError):
            await runtime.update("nobody", Add("x"))


async def test_a_finished_update_is_not_run_again_after_a_restart() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.start(Todo, None, run_id="restart")
        assert await runtime.update("restart", Add("milk"), update_id="u1") == 1
    assert (await store.read_run("restart")).status is RunStatus.INTERRUPTED
    async with Runtime(store=store) as runtime, anyio.create_task_group() as tg:
        tg.start_soon(runtime.recover)
        # the recorded reply comes back; the handler does not run again
        assert await runtime.update("restart", Add("milk"), update_id="u1") == 1
        await runtime.signal("restart", Done())
    assert RAN == ["milk"]
    # the orchestrator's attributes are not restored: its own state lives in steps
    assert await runtime_result(store, "restart") == []


async def until_accepted(store: MemoryStore, run_id: str) -> None:
    while True:
        log = await store.read_log(run_id)
        if any(isinstance(r, EventRecord) and r.kind == "update_accepted" for r in log):
            return
        await anyio.sleep(0.005)


async def runtime_result(store: MemoryStore, run_id: str) -> object:
    async with Runtime(store=store) as runtime:
        return await runtime.result(run_id)
