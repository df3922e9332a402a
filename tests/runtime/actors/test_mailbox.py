"""Mailboxes and refs: ordering, backpressure, send_nowait, asks, timeouts, cancellation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow import Actor, Runtime, handler
from actorflow.errors import (
    ActorFailedError,
    AskTimeoutError,
    MailboxClosedError,
    MailboxFullError,
)
from actorflow.runtime import LocalRef
from actorflow.runtime.actors import _mailbox

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class Item(msgspec.Struct, frozen=True):
    sender: str
    n: int


class Log(msgspec.Struct):
    items: list[tuple[str, int]] = msgspec.field(default_factory=list)


class Recorder(Actor):
    state: Log

    @handler
    async def record(self, msg: Item) -> int:
        self.state.items.append((msg.sender, msg.n))
        return len(self.state.items)

    @handler
    async def dump(self, msg: Log) -> list[tuple[str, int]]:
        return list(self.state.items)


class Gate(msgspec.Struct):
    pass


class Gated(Actor):
    """Blocks in its first handler until the test releases it."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()

    @handler
    async def wait(self, msg: Gate) -> str:
        self.entered.set()
        await self.release.wait()
        return "released"

    @handler
    async def item(self, msg: Item) -> int:
        return msg.n


async def test_messages_from_each_sender_arrive_in_order() -> None:
    async with Runtime(mailbox_size=4) as runtime:
        ref = await runtime.spawn(Recorder, name="rec")

        async def sender(name: str) -> None:
            for n in range(50):
                await ref.send(Item(name, n))

        async with anyio.create_task_group() as tg:
            for name in ("a", "b", "c"):
                tg.start_soon(sender, name)
        items = await ref.ask(Log())
    assert isinstance(items, list)
    assert len(items) == 150
    for name in ("a", "b", "c"):
        assert [n for s, n in items if s == name] == list(range(50))


async def _gated(runtime: Runtime, size: int) -> tuple[object, Gated]:
    ref = await runtime.spawn(Gated, name="gated", mailbox_size=size)
    ref.send_nowait(Gate())
    assert isinstance(ref, LocalRef)
    actor = ref._cell.actor
    assert isinstance(actor, Gated)
    await actor.entered.wait()
    return ref, actor


async def test_a_full_mailbox_makes_send_wait_and_send_nowait_raise() -> None:
    async with Runtime() as runtime:
        ref, actor = await _gated(runtime, 2)
        assert isinstance(ref, type(runtime.lookup("gated")))
        gated = runtime.lookup("gated")
        gated.send_nowait(Item("a", 1))
        gated.send_nowait(Item("a", 2))
        with pytest.raises(MailboxFullError) as info:
            gated.send_nowait(Item("a", 3))
        assert isinstance(info.value, anyio.WouldBlock)
        sent = anyio.Event()

        async def blocked_sender() -> None:
            await gated.send(Item("a", 3))
            sent.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked_sender)
            await anyio.wait_all_tasks_blocked()
            stats = gated.mailbox_statistics()
            assert (stats.current_size, stats.waiting_senders) == (2, 1)
            assert not sent.is_set()
            actor.release.set()
            await sent.wait()
        assert await gated.ask(Item("a", 4)) == 4


async def test_ask_times_out_with_ask_timeout_error() -> None:
    async with Runtime() as runtime:
        ref, actor = await _gated(runtime, 4)
        with pytest.raises(AskTimeoutError) as info:
            await ref.ask(Item("a", 1), timeout=0.01)  # type: ignore[attr-defined]
        assert isinstance(info.value, TimeoutError)
        assert info.value.actor == "gated"
        actor.release.set()


async def test_a_cancelled_ask_leaves_the_actor_running() -> None:
    async with Runtime() as runtime:
        ref, actor = await _gated(runtime, 4)
        with anyio.CancelScope() as scope:

            async def cancel_when_blocked() -> None:
                await anyio.wait_all_tasks_blocked()
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_blocked)
                await ref.ask(Item("a", 1))  # type: ignore[attr-defined]
        assert scope.cancelled_caught
        actor.release.set()
        assert await ref.ask(Item("a", 2)) == 2  # type: ignore[attr-defined]


async def test_a_sender_blocked_on_a_full_mailbox_can_be_cancelled() -> None:
    async with Runtime() as runtime:
        ref, actor = await _gated(runtime, 1)
        ref.send_nowait(Item("a", 1))  # type: ignore[attr-defined]
        with anyio.move_on_after(0.01) as scope:
            await ref.send(Item("a", 2))  # type: ignore[attr-defined]
        assert scope.cancelled_caught
        assert ref.mailbox_statistics().waiting_senders == 0  # type: ignore[attr-defined]
        actor.release.set()


async def test_a_failing_handler_reaches_the_asker_with_its_cause() -> None:
    class Fails(Actor):
        @handler
        async def item(self, msg: Item) -> int:
            if msg.n < 0:
                raise ValueError("negative")
            return msg.n

    async with Runtime() as runtime:
        ref = await runtime.spawn(Fails, name="fails")
        with pytest.raises(ActorFailedError) as info:
            await ref.ask(Item("a", -1))
        assert info.value.actor == "fails"
        assert isinstance(info.value.__cause__, ValueError)
        assert await ref.ask(Item("a", 1)) == 1  # still running, under supervision


async def test_sending_to_a_stopped_actor_raises_mailbox_closed() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Recorder, name="rec")
        await runtime.stop(ref)
        assert not ref.alive
        assert runtime.get("rec") is None
        with pytest.raises(MailboxClosedError):
            await ref.send(Item("a", 1))


async def test_refs_are_hashable_and_compare_by_actor() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Recorder, name="rec")
        assert runtime.get("rec") == ref
        assert len({ref, runtime.lookup("rec")}) == 1
        assert ref.actor_type is Recorder
        assert ref.scope is None


@pytest.mark.parametrize(
    "behaviour",
    [
        test_messages_from_each_sender_arrive_in_order,
        test_a_full_mailbox_makes_send_wait_and_send_nowait_raise,
        test_a_sender_blocked_on_a_full_mailbox_can_be_cancelled,
        test_sending_to_a_stopped_actor_raises_mailbox_closed,
    ],
    ids=["order", "backpressure", "cancel", "closed"],
)
async def test_mailboxes_work_on_anyios_public_calls_alone(
    monkeypatch: pytest.MonkeyPatch, behaviour: Callable[[], Awaitable[None]]
) -> None:
    # as if anyio had no event loop token (before 4.11): the per-call public functions
    monkeypatch.setattr(_mailbox, "_current_token", None)
    assert isinstance(_mailbox._backend(), _mailbox._PublicCalls)
    await behaviour()


async def test_a_mailbox_finds_the_loops_backend_once_through_public_anyio() -> None:
    # the fast path: no backend lookup per send (what the fallback above pays)
    backend = _mailbox._backend()
    assert not isinstance(backend, _mailbox._PublicCalls)
    assert isinstance(backend.create_event(), anyio.Event)
