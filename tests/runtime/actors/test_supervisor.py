"""Supervision: restart budgets, backoff, rollback of state, stop and escalate."""

from __future__ import annotations

import msgspec
import pytest

from actorflow import Actor, Runtime, SupervisorPolicy, handler
from actorflow.errors import (
    ActorFailedError,
    ConfigurationError,
    EscalationError,
    MailboxClosedError,
)
from actorflow.runtime.actors._supervisor import RestartTracker


class Add(msgspec.Struct, frozen=True):
    amount: int
    fail: bool = False


class Tally(msgspec.Struct):
    total: int = 0
    history: list[int] = msgspec.field(default_factory=list)


starts: list[str] = []


class Flaky(Actor):
    state: Tally

    async def on_start(self) -> None:
        starts.append(self.name)

    @handler
    async def add(self, msg: Add) -> int:
        self.state.total += msg.amount  # mutated in place before failing
        self.state.history.append(msg.amount)
        if msg.fail:
            raise RuntimeError("boom")
        return self.state.total


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def policy(clock: FakeClock, **options: float) -> SupervisorPolicy:
    return SupervisorPolicy(clock=clock, sleep=clock.sleep, **options)  # type: ignore[arg-type]


async def test_a_failed_handler_leaves_no_trace_in_the_state() -> None:
    clock = FakeClock()
    async with Runtime() as runtime:
        ref = await runtime.spawn(Flaky, name="f", supervisor=policy(clock))
        assert await ref.ask(Add(2)) == 2
        with pytest.raises(ActorFailedError):
            await ref.ask(Add(5, fail=True))
        assert await ref.ask(Add(1)) == 3
        reply = await ref.deliver(Add(0))
        await reply.event.wait()
    assert msgspec.msgpack.decode(reply.state, type=Tally) == Tally(3, [2, 1, 0])


async def test_restarts_back_off_exponentially_then_escalate() -> None:
    clock = FakeClock()
    starts.clear()
    supervisor = policy(clock, max_restarts=3, within=10, backoff=1, max_backoff=60)

    async def fail_four_times() -> None:
        async with Runtime() as runtime:
            ref = await runtime.spawn(Flaky, name="f", supervisor=supervisor)
            for _ in range(3):
                with pytest.raises(ActorFailedError):
                    await ref.ask(Add(1, fail=True))
            assert clock.sleeps == [1, 2, 4]
            with pytest.raises(ActorFailedError):
                await ref.ask(Add(1, fail=True))  # the fourth failure escalates
            await ref.ask(Add(1))  # the runtime is cancelled before this returns

    with pytest.raises(EscalationError) as info:
        await fail_four_times()
    assert info.value.actor == "f"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert starts == ["f"] * 4  # first start plus three restarts


def test_the_budget_counts_restarts_within_the_window_only() -> None:
    clock = FakeClock()
    tracker = RestartTracker(policy(clock, max_restarts=2, within=10, backoff=1))
    assert tracker.decide() == ("restart", 1)
    assert tracker.decide() == ("restart", 2)
    assert tracker.decide() == ("escalate", 0)
    clock.now = 11  # both earlier restarts fell out of the window
    assert tracker.decide() == ("restart", 1)


async def test_the_stop_policy_stops_the_actor_and_fails_queued_asks() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Flaky, name="f", supervisor=SupervisorPolicy.stop())
        with pytest.raises(ActorFailedError):
            await ref.ask(Add(1, fail=True))
        await runtime.stop(ref)
        assert not ref.alive
        with pytest.raises(MailboxClosedError):
            await ref.ask(Add(1))


def test_invalid_policies_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        SupervisorPolicy(max_restarts=-1)
    with pytest.raises(ConfigurationError):
        SupervisorPolicy(backoff_factor=0.5)
