"""Errors reach the user as themselves, never wrapped in an ``ExceptionGroup``.

Task groups are how the runtime keeps every task inside ``async with
Runtime()``; they are its business, not the user's. An error escaping
``async with Runtime()``, ``runtime.run(...)`` or the helpers of
``actorflow.testing`` is the error itself, so ``except RunFailedError:`` and
``pytest.raises(...)`` (which never matches a group) work. When several errors
happen at once, the first is raised and the others are attached to it (as its
``__context__`` chain or its ``__notes__``), never lost.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actorflow import Actor, Orchestrator, RunContext, Runtime, SupervisorPolicy, handler
from actorflow.errors import ActorFailedError, EscalationError, RunFailedError
from actorflow.storage import MemoryStore
from actorflow.testing import crash_and_recover, run_in_memory


class Failing(Orchestrator):
    __actorflow_name__ = "tests.errors_unwrapped.Failing"

    async def run(self, ctx: RunContext, _: None) -> None:
        raise KeyError("no such thing")


class Fail(msgspec.Struct, frozen=True):
    pass


class Failer(Actor):
    __actorflow_name__ = "tests.errors_unwrapped.Failer"

    @handler
    async def fail(self, _: Fail) -> None:
        raise ValueError("handler boom")


async def no_backoff(_: float) -> None:
    """A supervisor's sleep that does not wait: restarts come at once."""


def related(error: BaseException) -> list[str]:
    """Type names of everything attached to ``error``: its context/cause chain and notes."""
    found: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [error.__context__, error.__cause__]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        found.append(type(exc).__name__)
        todo += [exc.__context__, exc.__cause__]
    found.extend(getattr(error, "__notes__", []))
    return found


async def test_a_failed_runs_error_leaves_the_runtime_block_as_run_failed_error() -> None:
    with pytest.raises(RunFailedError, match="KeyError") as info:
        async with Runtime(store=MemoryStore()) as rt:
            await rt.run(Failing, None, run_id="failing")
    assert isinstance(info.value.__cause__, KeyError)


async def test_except_run_failed_error_catches_it_outside_the_runtime_block() -> None:
    caught: RunFailedError | None = None
    try:
        async with Runtime(store=MemoryStore()) as rt:
            await rt.run(Failing, None)
    except RunFailedError as exc:
        caught = exc
    except BaseException as exc:  # pragma: no cover - the failure this test is about
        pytest.fail(f"except RunFailedError did not catch it: got {exc!r}")
    assert caught is not None


async def test_a_plain_error_in_the_body_leaves_the_runtime_block_as_itself() -> None:
    with pytest.raises(ValueError, match="from the body") as info:
        async with Runtime(store=MemoryStore()):
            raise ValueError("from the body")
    assert not isinstance(info.value, BaseExceptionGroup)


async def test_a_plain_error_in_the_body_of_a_runtime_with_actors_leaves_as_itself() -> None:
    async def body() -> None:
        async with Runtime() as rt:
            ref = await rt.spawn(Failer, name="idle")
            assert ref.alive
            raise LookupError("from the body")

    with pytest.raises(LookupError, match="from the body"):
        await body()


async def test_a_root_actor_over_its_restart_budget_fails_the_runtime_with_escalation_error() -> (
    None
):
    policy = SupervisorPolicy(max_restarts=1, sleep=no_backoff)

    async def body() -> None:
        async with Runtime() as rt:
            ref = await rt.spawn(Failer, name="fragile", supervisor=policy)
            for _ in range(2):
                with pytest.raises(ActorFailedError):
                    await ref.ask(Fail())
            await anyio.sleep_forever()  # cancelled by the escalation

    with pytest.raises(EscalationError, match="handler boom") as info:
        await body()
    assert isinstance(info.value.__cause__, ValueError)


async def test_two_errors_at_once_raise_the_first_with_the_other_attached() -> None:
    """The body's ask fails (ActorFailedError) as its actor escalates (EscalationError).

    Both happen: the handler's failure is the ask's reply, and the escalating
    actor fails the runtime. Either may count as the first (the test does not
    fix the order); it is raised, and the other is attached to it.
    """

    async def body() -> None:
        async with Runtime() as rt:
            ref = await rt.spawn(Failer, name="f", supervisor=SupervisorPolicy.escalate())
            await ref.ask(Fail())

    with pytest.raises((EscalationError, ActorFailedError)) as info:
        await body()
    raised = info.value
    other = "ActorFailedError" if isinstance(raised, EscalationError) else "EscalationError"
    attached = related(raised)
    assert any(other in item for item in attached), (
        f"{type(raised).__name__} was raised and the {other} was lost: attached {attached}"
    )


async def test_run_in_memory_raises_the_runs_error_itself() -> None:
    with pytest.raises(RunFailedError, match="KeyError"):
        await run_in_memory(Failing, None)


async def test_crash_and_recover_raises_the_underlying_error_not_a_group() -> None:
    with pytest.raises(RunFailedError, match="KeyError") as info:
        await crash_and_recover(Failing, None, crash_after=1)
    assert isinstance(info.value.__cause__, KeyError)
