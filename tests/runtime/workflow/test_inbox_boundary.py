"""The run inbox's boundary: what users send is never read as what actorflow sends itself.

Signals, updates, their replies, cancel requests, ``resume`` answers and
child runs' ends share one inbox. Each entry carries a kind only the
runtime sets; names in actorflow's namespace are refused at ``signal()``;
a rejected update is final; recovery reads the inbox once; untaken
payloads stay in the store past a bounded cache; retries of what was
delivered succeed after the run ended.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import pytest

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig, update
from actorflow.errors import (
    ReservedInboxNameError,
    RunFinishedError,
    RunPaused,
    SignalTooLargeError,
    UpdateRejectedError,
)
from actorflow.runtime.workflow._children import ChildEnd
from actorflow.runtime.workflow._signals import PAYLOAD_CACHE
from actorflow.storage import (
    FileStore,
    InboxEntry,
    MemoryStore,
    RunStatus,
    post_message,
    read_messages,
)

if TYPE_CHECKING:
    from pathlib import Path

FAST = RuntimeConfig(signal_poll_interval=0.01)


class Go(msgspec.Struct, frozen=True):
    n: int


class Done(msgspec.Struct, frozen=True):
    pass


class Add(msgspec.Struct, frozen=True):
    item: str


class Probe(msgspec.Struct, frozen=True):
    pass


class Hooks:
    """Events a test's workflows set (made anew in each test, on its loop)."""

    started: anyio.Event
    child: str = ""


HOOKS = Hooks()


@pytest.fixture(autouse=True)
def _hooks() -> None:
    HOOKS.started = anyio.Event()
    HOOKS.child = ""
    RAN.clear()
    VALIDATED.clear()
    ALLOW[0] = False


def named(name: str) -> type[msgspec.Struct]:
    """A message class registered under ``name``, as a user could make one."""
    return msgspec.defstruct(
        "Forged",
        [("child", str), ("status", str), ("result", bytes)],
        namespace={"__actorflow_name__": name},
    )


# --- 1 and 3: actorflow's names are refused; a user's signal is only ever a signal ----


class InboxWaitGo(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        return n + (await ctx.wait_for(Go)).n


class InboxParent(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> int:
        child = await ctx.start_child(InboxWaitGo, 38)
        HOOKS.child = child.run_id
        HOOKS.started.set()
        result: int = await child.result()
        return result


async def test_a_signal_named_like_a_childs_end_is_refused_and_never_read_as_one() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxParent, None, run_id="forge")
        await HOOKS.started.wait()
        child = HOOKS.child
        forged = named(f"actorflow.child/{child}")(
            child=child, status="completed", result=msgspec.msgpack.encode(666)
        )
        with pytest.raises(ReservedInboxNameError, match="actorflow"):
            await runtime.signal("forge", forged)
        # posted as a signal by other means, it is still a signal: the parent never takes it
        end = ChildEnd(child=child, status=RunStatus.COMPLETED, result=msgspec.msgpack.encode(666))
        await post_message(
            store,
            "forge",
            entry_id="forged",
            type=f"actorflow.child/{child}",
            payload=msgspec.msgpack.encode(end),
            kind="signal",
        )
        await runtime.signal(child, Go(2))
        assert await handle.result() == 40


@pytest.mark.parametrize(
    ("type_name", "entry_id"),
    [
        ("actorflow.cancel", None),
        ("actorflow.update-reply", None),
        ("actorflow.update/Add", None),
        ("Go", "actorflow.cancel"),
        ("Go", "reply:abc"),
        ("Go", "update:abc"),
        ("Go", "resume:0"),
        ("Go", "actorflow.child/x"),
    ],
)
async def test_signals_in_actorflows_namespace_are_refused_before_anything_is_stored(
    type_name: str, entry_id: str | None
) -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxWaitGo, 1, run_id="names")
        message: object = named(type_name)(child="", status="", result=b"")
        if type_name == "Go":
            message = Go(1)
        with pytest.raises(ReservedInboxNameError) as info:
            await runtime.signal("names", message, id=entry_id)
        assert info.value.run_id == "names"
        assert await read_messages(store, "names") == []
        # names that only resemble them are a user's own
        await runtime.signal("names", Go(2), id="my-update:abc")
        assert await handle.result() == 3


class InboxCounter(Orchestrator):
    total: int

    @update
    async def add(self, ctx: RunContext, message: Go) -> int:
        self.total += message.n
        return self.total

    async def run(self, ctx: RunContext, _: None) -> int:
        self.total = 0
        await ctx.wait_for(Done)
        return self.total


async def test_after_a_refused_forgery_cancel_and_updates_still_reach_the_run() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxCounter, None, run_id="c")
        for forged in ("actorflow.cancel", "reply:u1", "update:u1"):
            with pytest.raises(ReservedInboxNameError):
                await runtime.signal("c", Done(), id=forged)
        assert await runtime.update("c", Go(5), update_id="u1") == 5
        async with Runtime(store=store, config=FAST) as other:
            await other.cancel("c", reason="stop")  # through the inbox: ``runtime`` owns it
        with pytest.raises(Exception, match="stop"):
            await handle.result()
    assert (await store.read_run("c")).status is RunStatus.CANCELLED


# --- 2: a rejected update is final ---------------------------------------------------

RAN: list[str] = []
VALIDATED: list[str] = []
ALLOW = [False]


def allowed(self: InboxGate, message: Add) -> None:
    VALIDATED.append(message.item)
    if not ALLOW[0]:
        raise ValueError("the gate is closed")


class InboxGate(Orchestrator):
    items: list[str]

    @update(validator=allowed)
    async def add(self, ctx: RunContext, message: Add) -> int:
        RAN.append(message.item)
        self.items.append(message.item)
        return len(self.items)

    @update
    async def probe(self, ctx: RunContext, message: Probe) -> list[str]:
        return list(self.items)

    async def run(self, ctx: RunContext, _: None) -> list[str]:
        self.items = []
        await ctx.wait_for(Done)
        await ctx.wait_for_input("go on?")
        await ctx.wait_for(Done)
        return self.items


async def test_a_rejected_update_is_never_validated_or_run_on_a_later_attempt() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxGate, None, run_id="gate")
        with pytest.raises(UpdateRejectedError, match="the gate is closed"):
            await runtime.update("gate", Add("late"), update_id="late")
        await runtime.signal("gate", Done())
        with pytest.raises(RunPaused):
            await handle.result()
        ALLOW[0] = True  # the validator would pass now
        result: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def resume() -> None:
                result.append(await runtime.resume("gate", "yes"))

            tg.start_soon(resume)
            # the probe's reply is recorded and posted after the attempt saw the inbox
            assert await runtime.update("gate", Probe()) == []
            await runtime.signal("gate", Done())
        assert result == [[]]
        # a retry gets the refusal, still
        with pytest.raises(UpdateRejectedError, match="the gate is closed"):
            await runtime.update("gate", Add("late"), update_id="late")
    assert RAN == []
    assert VALIDATED == ["late"]


# --- 5: recovery reads the inbox once and posts nothing again ----------------------


class CountingStore(MemoryStore):
    """A memory store that counts the inbox entries read and the posts made."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.posts = 0

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        entries = await super().read_inbox(run_id, start, stop)
        self.reads += len(entries)
        return entries

    async def post(self, run_id: str, **kwargs: Any) -> InboxEntry:
        self.posts += 1
        return await super().post(run_id, **kwargs)


class InboxTally(Orchestrator):
    total: int

    @update
    async def add(self, ctx: RunContext, message: Go) -> int:
        self.total += message.n
        return self.total

    async def run(self, ctx: RunContext, _: None) -> str:
        self.total = 0
        await ctx.wait_for(Done)
        return await ctx.wait_for_input("more?")  # its total is rebuilt by replay, not kept


@pytest.mark.parametrize("updates", [20, 80])
async def test_resuming_after_many_updates_reads_each_entry_a_bounded_number_of_times(
    updates: int,
) -> None:
    store = CountingStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxTally, None, run_id="tally")
        for i in range(updates):
            assert await runtime.update("tally", Go(1), update_id=f"u{i}") == i + 1
        await runtime.signal("tally", Done())
        with pytest.raises(RunPaused):
            await handle.result()
        store.reads = store.posts = 0
        assert await runtime.resume("tally", "done") == "done"
    assert store.posts == 1  # the answer; no reply posted again
    entries = 2 * updates + 2
    assert store.reads <= 2 * entries  # linear: not a scan per update


# --- 9: untaken payloads stay in the store past a bounded cache ---------------------


class Big(msgspec.Struct, frozen=True):
    tag: int
    data: bytes


class InboxHoard(Orchestrator):
    async def run(self, ctx: RunContext, count: int) -> list[tuple[int, int]]:
        await ctx.wait_for(Go)  # every Big is in the inbox by now, untaken
        HOOKS.started.set()
        await ctx.wait_for(Done)
        got = [await ctx.wait_for(Big) for _ in range(count)]
        return [(b.tag, len(b.data)) for b in got]


async def test_a_live_run_keeps_only_a_bounded_share_of_untaken_payloads_in_memory(
    tmp_path: Path,
) -> None:
    size = 2 * 1024 * 1024
    count = 6
    store = FileStore(tmp_path / "store")
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxHoard, count, run_id="hoard")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for tag in range(count):
                await runtime.signal("hoard", Big(tag, bytes([tag]) * size))
            await runtime.signal("hoard", Go(0))
            await HOOKS.started.wait()
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held < PAYLOAD_CACHE + size  # not all 12 MiB of them
        await runtime.signal("hoard", Done())
        assert await handle.result() == [(tag, size) for tag in range(count)]


# --- 14: retries of what was delivered succeed after the run ended -----------------


async def test_retrying_a_delivered_signal_or_answered_update_after_the_end_succeeds() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxCounter, None, run_id="ended")
        assert await runtime.update("ended", Go(3), update_id="three") == 3
        first = await runtime.signal("ended", Done(), id="done-1")
        assert await handle.result() == 3
        again = await runtime.signal("ended", Done(), id="done-1")
        assert (again.seq, again.entry_id) == (first.seq, first.entry_id)
        assert await runtime.update("ended", Go(3), update_id="three") == 3
        with pytest.raises(RunFinishedError):
            await runtime.signal("ended", Done(), id="never-sent")
        with pytest.raises(RunFinishedError):
            await runtime.update("ended", Go(3), update_id="never-sent")
        with pytest.raises(RunFinishedError):
            await runtime.signal("ended", Done())


# --- the size limit ------------------------------------------------------------------


async def test_a_signal_or_update_over_the_size_limit_is_refused_and_nothing_is_stored() -> None:
    store = MemoryStore()
    config = RuntimeConfig(signal_poll_interval=0.01, max_signal_size=1000)
    async with Runtime(store=store, config=config) as runtime:
        handle = await runtime.start(InboxCounter, None, run_id="sized")
        with pytest.raises(SignalTooLargeError, match="max_signal_size") as info:
            await runtime.signal("sized", Big(1, b"x" * 2000))
        assert (info.value.limit, info.value.size > 2000) == (1000, True)
        with pytest.raises(SignalTooLargeError):
            await runtime.update("sized", Big(1, b"x" * 2000))
        assert await read_messages(store, "sized") == []
        await runtime.signal("sized", Done())
        assert await handle.result() == 0


def test_the_size_limit_is_configurable_from_the_environment() -> None:
    config = RuntimeConfig.from_env({"ACTORFLOW_MAX_SIGNAL_SIZE": "2048"})
    assert config.max_signal_size == 2048
    with pytest.raises(Exception, match="ACTORFLOW_MAX_SIGNAL_SIZE"):
        RuntimeConfig.from_env({"ACTORFLOW_MAX_SIGNAL_SIZE": "0"})


# --- entries of earlier versions ----------------------------------------------------


async def test_entries_posted_before_kinds_existed_are_read_as_they_were() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxWaitGo, 1, run_id="old")
        # as 0.3 posted a cancel request: no kind, its type and id say what it is
        await post_message(
            store,
            "old",
            entry_id="actorflow.cancel",
            type="actorflow.cancel",
            payload=msgspec.msgpack.encode({"reason": "from 0.3"}),
        )
        with pytest.raises(Exception, match=r"cancel|from 0\.3"):
            await handle.result()
    assert (await store.read_run("old")).status is RunStatus.CANCELLED


async def test_a_query_shows_each_untaken_entrys_kind_and_leaves_update_replies_out() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(InboxCounter, None, run_id="q")
        assert await runtime.update("q", Go(2), update_id="two") == 2
        await runtime.signal("q", Go(9), id="left")  # nobody waits for a Go
        await post_message(  # as 0.3 posted a cancel request, unread yet
            store, "q", entry_id="actorflow.cancel", type="actorflow.cancel", payload=b"\x80"
        )
        query = await runtime.query("q")
        assert [(e.kind, e.entry_id) for e in query.inbox] == [
            ("signal", "left"),
            ("cancel", "actorflow.cancel"),
        ]
        with pytest.raises(Exception, match="cancel"):
            await handle.result()
