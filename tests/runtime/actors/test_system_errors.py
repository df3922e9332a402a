"""Errors leave ``async with ActorSystem()`` (and the workflow ``Runtime()``) as themselves.

Never as an exception group: ``except ValueError`` catches the body's
ValueError, ``except EscalationError`` an escalation, and an enclosing cancel
scope still gets the event loop's own cancellation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow import Actor, Runtime, SupervisorPolicy, handler
from actorflow.errors import EscalationError, RunFailedError
from actorflow.runtime import LocalRef
from actorflow.runtime.actors import ActorSystem
from actorflow.storage import MemoryStore

if TYPE_CHECKING:
    from actorflow.runtime import RunContext


class Fail(msgspec.Struct, frozen=True):
    pass


class Block(msgspec.Struct, frozen=True):
    pass


class Worker(Actor):
    def __init__(self) -> None:
        self.entered = anyio.Event()

    @handler
    async def fail(self, msg: Fail) -> None:
        raise RuntimeError("boom")

    @handler
    async def block(self, msg: Block) -> None:
        self.entered.set()
        await anyio.sleep_forever()


class FailingWorkflow:
    async def run(self, ctx: RunContext, input: int) -> int:
        raise ValueError(f"no {input}")


SYSTEMS = [
    pytest.param(ActorSystem, id="ActorSystem"),
    pytest.param(Runtime, id="Runtime"),
]


@pytest.mark.parametrize("system", SYSTEMS)
async def test_the_bodys_own_error_leaves_as_itself(system: type[ActorSystem]) -> None:
    async def fail() -> None:
        async with system() as running:
            await running.spawn(Worker, name="w")
            raise ValueError("body")

    with pytest.raises(ValueError, match="body") as info:
        await fail()
    assert not isinstance(info.value, BaseExceptionGroup)
    assert not getattr(info.value, "__notes__", [])


@pytest.mark.parametrize("system", SYSTEMS)
async def test_a_root_escalation_leaves_as_an_escalation_error(system: type[ActorSystem]) -> None:
    async def escalate() -> None:
        async with system() as running:
            ref = await running.spawn(Worker, name="w", supervisor=SupervisorPolicy.escalate())
            async with anyio.create_task_group() as tg:  # cancelled with the body
                tg.start_soon(anyio.sleep_forever)
                await ref.send(Fail())
                await anyio.sleep_forever()

    with pytest.raises(EscalationError) as info:
        await escalate()
    assert info.value.actor == "w"
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_a_failed_run_leaves_as_run_failed_error() -> None:
    with pytest.raises(RunFailedError) as info:
        async with Runtime(store=MemoryStore()) as runtime:
            await runtime.run(FailingWorkflow, 1)
    assert isinstance(info.value.__cause__, ValueError)


async def test_a_system_exit_in_the_body_leaves_as_itself() -> None:
    with pytest.raises(SystemExit):
        async with ActorSystem():
            raise SystemExit(3)


async def test_a_tasks_error_leaves_as_itself_with_the_others_as_notes() -> None:
    async def fails(error: Exception) -> None:
        raise error

    async def two_tasks_fail() -> None:
        async with ActorSystem() as system:
            system.require_running("test").start_soon(fails, KeyError("one"))
            system.require_running("test").start_soon(fails, IndexError("two"))
            await anyio.sleep_forever()

    with pytest.raises((KeyError, IndexError)) as info:
        await two_tasks_fail()
    other = "IndexError" if isinstance(info.value, KeyError) else "KeyError"
    assert [other in note for note in info.value.__notes__] == [True]


@pytest.mark.parametrize("system", SYSTEMS)
async def test_a_cancel_scope_around_the_system_still_cancels_it(
    system: type[ActorSystem],
) -> None:
    with anyio.CancelScope() as scope:
        async with system() as running:
            await running.spawn(Worker, name="w")
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught


async def test_a_cancel_scope_around_the_system_cancels_its_shutdown_too() -> None:
    scope = anyio.CancelScope()
    finished = anyio.Event()

    async def run_system() -> None:
        with scope:
            async with ActorSystem(shutdown_timeout=3600) as system:
                ref = await system.spawn(Worker, name="busy")
                ref.send_nowait(Block())
                assert isinstance(ref, LocalRef)
                actor = ref._cell.actor
                assert isinstance(actor, Worker)
                await actor.entered.wait()
            # leaving the block waits for the busy actor to drain
        finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_system)
        await anyio.wait_all_tasks_blocked()
        scope.cancel()
        await finished.wait()
    assert scope.cancelled_caught
