"""The Runtime: names, scopes, escalation, message meta, shutdown, many actors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import pytest

from actorflow import Actor, Runtime, SupervisorPolicy, handler
from actorflow.errors import (
    ActorNotFoundError,
    ActorStoppedError,
    DuplicateActorNameError,
    EscalationError,
    InvalidNameError,
    RuntimeNotRunningError,
)
from actorflow.runtime import ActorRef, LocalRef, MailboxStatistics, current_message_meta
from actorflow.runtime.actors import ActorSystem

if TYPE_CHECKING:
    from actorflow.runtime.actors import AgentReply


class Add(msgspec.Struct, frozen=True):
    amount: int
    fail: bool = False


class Tally(msgspec.Struct):
    total: int = 0


class Counter(Actor):
    state: Tally

    @handler
    async def add(self, msg: Add) -> object:
        self.state.total += msg.amount
        if msg.fail:
            raise RuntimeError("boom")
        return (self.state.total, current_message_meta())


class Block(msgspec.Struct):
    pass


class Busy(Actor):
    def __init__(self) -> None:
        self.entered = anyio.Event()

    @handler
    async def block(self, msg: Block) -> None:
        self.entered.set()
        await anyio.sleep_forever()


def _tasks() -> int:
    return len(anyio.get_running_tasks())


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "x" * 129, "sp ace"])
async def test_invalid_names_are_refused(name: str) -> None:
    async with Runtime() as runtime:
        with pytest.raises(InvalidNameError):
            await runtime.spawn(Counter, name=name)


async def test_names_are_unique_in_the_root_scope_and_lookup_finds_them() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="researcher-0.v1_x")
        with pytest.raises(DuplicateActorNameError):
            await runtime.spawn(Counter, name="researcher-0.v1_x")
        assert runtime.lookup("researcher-0.v1_x") is ref
        with pytest.raises(ActorNotFoundError):
            runtime.lookup("nobody")


async def test_spawning_outside_the_runtime_is_an_error() -> None:
    runtime = Runtime()
    with pytest.raises(RuntimeNotRunningError):
        await runtime.spawn(Counter, name="c")


async def test_two_scopes_can_hold_the_same_name() -> None:
    async with ActorSystem() as runtime:  # scopes are the engine's hook: the kernel's
        one = runtime.open_scope("run-1", on_escalate=lambda e: None)
        two = runtime.open_scope("run-2", on_escalate=lambda e: None)
        a = await one.spawn(Counter, name="researcher-0")
        b = await two.spawn(Counter, name="researcher-0", state=Tally(10))
        assert a != b
        assert (a.scope, b.scope) == ("run-1", "run-2")
        assert one.get("researcher-0") is a
        assert runtime.get("researcher-0") is None
        assert await b.ask(Add(1)) == (11, None)
        await one.aclose()
        assert not a.alive
        assert b.alive
        assert one.get("researcher-0") is None


async def test_a_scoped_actor_escalates_to_its_scope_not_the_runtime() -> None:
    escalations: list[EscalationError] = []
    async with ActorSystem() as runtime:
        scope = runtime.open_scope("run-1", on_escalate=escalations.append)
        ref = await scope.spawn(Counter, name="c", supervisor=SupervisorPolicy.escalate())
        with pytest.raises(Exception, match="boom"):
            await ref.ask(Add(1, fail=True))
        await runtime.stop(ref)
        assert [e.actor for e in escalations] == ["c"]
        assert runtime.running
        other = await runtime.spawn(Counter, name="still-fine")
        assert await other.ask(Add(1)) == (1, None)


async def test_the_runtime_fails_cleanly_when_a_root_actor_escalates() -> None:
    before = _tasks()

    async def fail() -> None:
        async with Runtime() as runtime:
            ref = await runtime.spawn(Counter, name="c", supervisor=SupervisorPolicy.escalate())
            await ref.send(Add(1, fail=True))
            await anyio.sleep_forever()  # cancelled by the escalation

    with pytest.raises(EscalationError, match="boom"):
        await fail()
    assert _tasks() == before


async def _deliver_and_wait(ref: ActorRef[Counter], msg: Add, meta: object) -> tuple[object, bytes]:
    reply = await ref.deliver(msg, meta)
    await reply.event.wait()
    if reply.error is not None:
        raise reply.error
    return reply.value, reply.state


async def test_handlers_see_the_meta_and_a_delivery_reply_has_the_exact_state() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="c")
        reply, state = await _deliver_and_wait(ref, Add(2), {"key": "step-1"})
        assert reply == (2, {"key": "step-1"})
        assert state == msgspec.msgpack.encode(Tally(2))
        await ref.deliver(Add(3), "step-2")  # queued now; nobody waits for it
        reply, state = await _deliver_and_wait(ref, Add(0), None)
        assert reply == (5, None)
        assert state == msgspec.msgpack.encode(Tally(5))
        with pytest.raises(Exception, match="boom"):
            await _deliver_and_wait(ref, Add(100, fail=True), "step-3")
        _, state = await _deliver_and_wait(ref, Add(0), None)
        assert state == msgspec.msgpack.encode(Tally(5))


async def test_shutdown_drains_then_cancels_busy_actors_after_the_deadline() -> None:
    before = _tasks()
    async with Runtime(shutdown_timeout=0.05) as runtime:
        busy = await runtime.spawn(Busy, name="busy")
        calm = await runtime.spawn(Counter, name="calm")
        busy.send_nowait(Block())
        assert isinstance(busy, LocalRef)
        actor = busy._cell.actor
        assert isinstance(actor, Busy)
        await actor.entered.wait()
        calm.send_nowait(Add(1))
    assert not busy.alive
    assert not calm.alive
    assert _tasks() == before


async def test_stopping_a_busy_actor_fails_its_pending_asks() -> None:
    async with Runtime() as runtime:
        busy = await runtime.spawn(Busy, name="busy")
        failures: list[BaseException] = []

        async def ask() -> None:
            try:
                await busy.ask(Block())
            except ActorStoppedError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            await runtime.stop(busy, timeout=0)
        assert len(failures) == 2


async def test_ten_thousand_actors_spawn_and_stop_without_leaks() -> None:
    before = _tasks()
    async with Runtime() as runtime:
        refs = [await runtime.spawn(Counter, name=f"a{i}") for i in range(10_000)]
        assert _tasks() == before + 10_000
        for ref in refs[::1000]:
            assert await ref.ask(Add(1)) == (1, None)
        for ref in refs[:5_000]:
            await runtime.stop(ref)
        assert _tasks() == before + 5_000
    assert _tasks() == before
    assert runtime._system._live == 0
    assert not any(ref.alive for ref in refs)


def test_the_counter_example_runs_on_both_backends() -> None:
    example = Path(__file__).parents[3] / "examples" / "counter.py"
    done = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "asyncio and trio" in done.stdout


class _ElsewhereRef(ActorRef[Counter]):
    """A ref to an actor this process does not hold (as a placed agent's is)."""

    __slots__ = ()

    name = "elsewhere"
    scope = None
    actor_type = Counter
    alive = True

    def mailbox_statistics(self) -> MailboxStatistics:
        return MailboxStatistics(current_size=0, max_size=0, waiting_senders=0, closed=False)

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return other is self

    async def send(self, msg: object) -> None:
        pass

    def send_nowait(self, msg: object) -> None:
        pass

    async def ask(self, msg: object, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        return None

    async def deliver(self, msg: object, meta: object | None = None) -> AgentReply:
        raise NotImplementedError


async def test_stopping_a_ref_to_an_actor_elsewhere_is_a_named_error() -> None:
    elsewhere = object.__new__(_ElsewhereRef)
    async with Runtime() as runtime:
        with pytest.raises(ActorNotFoundError, match="elsewhere"):
            await runtime.stop(elsewhere)


def test_the_runtime_has_an_actor_system_and_keeps_the_engines_hooks_off_the_users_object() -> None:
    runtime = Runtime(shutdown_timeout=1.5)
    assert not isinstance(runtime, ActorSystem)
    for hook in ("open_scope", "spawn_now", "require_running"):
        assert not hasattr(runtime, hook), hook
    assert (runtime.shutdown_timeout, runtime.mailbox_size, runtime.running) == (1.5, 256, False)
