"""Retry policies: precedence, Retry-After hints, non-retryable errors, recorded attempts."""

from __future__ import annotations

import itertools
import math

import msgspec
import pytest

from actorflow import (
    Orchestrator,
    Request,
    RetryAfter,
    RetryPolicy,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
)
from actorflow.errors import ConfigurationError, RetryPolicyError, RunFailedError
from actorflow.runtime import current_step
from actorflow.storage import MemoryStore, StepRecord
from actorflow.testing import FakeClock

FAST = RetryPolicy(max_attempts=1, initial_backoff=0.0, max_backoff=0.0)


class Job(Request[int], frozen=True):
    fail_first: int
    error: str = "value"


class Throttled(Exception):
    """Any exception with a numeric ``retry_after`` is a hint (an HTTP client's 429, say)."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(f"429, retry after {retry_after}")


calls: list[tuple[int, float]] = []  # (attempt, clock time) of each handler call
clock_in_use: list[FakeClock] = []


def _fail(kind: str) -> Exception:
    if kind == "value":
        return ValueError("transient")
    if kind == "type":
        return TypeError("bad request")
    if kind == "after":
        return RetryAfter(2.0)
    return Throttled(2.0)


async def _work(job: Job) -> int:
    step = current_step()
    assert step is not None
    calls.append((step.attempt, clock_in_use[0].now() if clock_in_use else 0.0))
    if step.attempt <= job.fail_first:
        raise _fail(job.error)
    return step.attempt


class Plain(Specialist):
    @handler
    async def work(self, job: Job) -> int:
        return await _work(job)


class TwoByHandler(Specialist):
    @handler(retry=RetryPolicy(max_attempts=2, initial_backoff=0.0, max_backoff=0.0))
    async def work(self, job: Job) -> int:
        return await _work(job)


class FourByClass(Specialist):
    retry = RetryPolicy(max_attempts=4, initial_backoff=0.0, max_backoff=0.0)

    @handler
    async def work(self, job: Job) -> int:
        return await _work(job)


class ThreeByHandlerOverClass(FourByClass):
    @handler(Job, retry=RetryPolicy(max_attempts=3, initial_backoff=0.0, max_backoff=0.0))
    async def work(self, job: Job) -> int:
        return await _work(job)


class StrictOnTypeErrors(Specialist):
    retry = RetryPolicy(max_attempts=5, initial_backoff=1.0, non_retryable=(TypeError,))

    @handler
    async def work(self, job: Job) -> int:
        return await _work(job)


AGENTS: dict[str, type[Specialist]] = {
    cls.__name__: cls
    for cls in (Plain, TwoByHandler, FourByClass, ThreeByHandlerOverClass, StrictOnTypeErrors)
}


class Ask(Request[int], frozen=True):
    agent: str
    job: Job
    per_call: int = 0  # > 0: ctx.ask(..., retry=RetryPolicy(max_attempts=per_call))


class AskOnce(Orchestrator):
    async def run(self, ctx: RunContext, ask: Ask) -> int:
        agent = await ctx.spawn(AGENTS[ask.agent], name="agent")
        retry = None
        if ask.per_call:
            retry = RetryPolicy(max_attempts=ask.per_call, initial_backoff=0.0, max_backoff=0.0)
        return await ctx.ask(agent, ask.job, retry=retry)


async def _attempts(
    agent: str, job: Job, *, per_call: int = 0, config: RuntimeConfig | None = None
) -> tuple[list[int], StepRecord]:
    calls.clear()
    clock = FakeClock()
    clock_in_use[:] = [clock]
    store = MemoryStore()
    config = config or RuntimeConfig(retry=RetryPolicy(max_attempts=1))
    async with Runtime(store=store, config=config, clock=clock) as runtime:
        try:
            await runtime.run(AskOnce, Ask(agent, job, per_call), run_id="r")
        except RunFailedError:
            pass
    (record,) = [
        r for r in await store.read_log("r") if isinstance(r, StepRecord) and r.kind == "ask"
    ]
    return [attempt for attempt, _ in calls], record


async def test_runtime_default_applies_without_other_policies() -> None:
    attempts, record = await _attempts("Plain", Job(fail_first=10))
    assert attempts == [1]
    assert record.error is not None
    attempts, record = await _attempts(
        "Plain", Job(fail_first=10), config=RuntimeConfig(step_retries=2, retry_backoff=0.0)
    )
    assert attempts == [1, 2, 3]  # step_retries: the default policy's alias
    assert record.attempts == 3


async def test_handler_policy_beats_class_and_runtime() -> None:
    attempts, _ = await _attempts("TwoByHandler", Job(fail_first=10))
    assert attempts == [1, 2]
    attempts, _ = await _attempts("ThreeByHandlerOverClass", Job(fail_first=10))
    assert attempts == [1, 2, 3]


async def test_class_policy_beats_runtime() -> None:
    attempts, _ = await _attempts("FourByClass", Job(fail_first=10))
    assert attempts == [1, 2, 3, 4]


async def test_call_policy_beats_handler_and_class() -> None:
    attempts, _ = await _attempts("ThreeByHandlerOverClass", Job(fail_first=10), per_call=5)
    assert attempts == [1, 2, 3, 4, 5]
    attempts, _ = await _attempts("TwoByHandler", Job(fail_first=10), per_call=1)
    assert attempts == [1]


async def test_failed_attempts_and_their_errors_are_recorded() -> None:
    attempts, record = await _attempts("FourByClass", Job(fail_first=2))
    assert attempts == [1, 2, 3]
    assert record.error is None
    assert record.attempts == 3
    assert [(e.type, e.message) for e in record.attempt_errors] == [("ValueError", "transient")] * 2
    attempts, record = await _attempts("TwoByHandler", Job(fail_first=5))
    assert record.error is not None
    assert record.attempts == 2
    assert len(record.attempt_errors) == 2


@pytest.mark.parametrize("error", ["after", "attribute"])
async def test_retry_after_hint_is_honoured(error: str) -> None:
    # the class's backoff is 1 s; the hint asks for 2 s, and gets them
    attempts, record = await _attempts("StrictOnTypeErrors", Job(fail_first=1, error=error))
    assert attempts == [1, 2]
    assert record.error is None
    (first, at_first), (_, at_second) = calls
    assert first == 1
    assert at_second - at_first >= 2.0


async def test_backoff_follows_the_policy_on_the_runtime_clock() -> None:
    await _attempts("StrictOnTypeErrors", Job(fail_first=3))
    times = [at for _, at in calls]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == [1.0, 2.0, 4.0]  # initial 1 s, doubling: the fake clock jumps exactly


async def test_non_retryable_error_fails_the_step_at_once_with_its_cause() -> None:
    calls.clear()
    clock = FakeClock()
    clock_in_use[:] = [clock]
    store = MemoryStore()
    async with Runtime(store=store, clock=clock) as runtime:
        with pytest.raises(RunFailedError) as caught:
            await runtime.run(AskOnce, Ask("StrictOnTypeErrors", Job(10, "type")), run_id="r")
    assert "bad request" in str(caught.value)
    assert [a for a, _ in calls] == [1]
    assert clock.now() == 0.0  # no backoff either
    (record,) = [r for r in await store.read_log("r") if isinstance(r, StepRecord)][1:]
    assert record.error is not None
    assert record.error.type == "TypeError"
    assert record.attempts == 1


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"initial_backoff": -1.0}, "initial_backoff"),
        ({"initial_backoff": 5.0, "max_backoff": 1.0}, "max_backoff"),
        ({"multiplier": -2.0}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
        ({"max_backoff": math.nan}, "max_backoff"),
        ({"retry_on": ("ValueError",)}, "retry_on"),
    ],
)
def test_bad_policy_values_are_named_errors(values: dict[str, object], field: str) -> None:
    with pytest.raises(RetryPolicyError, match=f"RetryPolicy.{field}") as caught:
        RetryPolicy(**values)  # type: ignore[arg-type]
    assert isinstance(caught.value, ConfigurationError)


def test_runtime_config_takes_only_a_policy() -> None:
    with pytest.raises(ConfigurationError, match="retry"):
        RuntimeConfig(retry=3)  # type: ignore[arg-type]
    assert RuntimeConfig(step_retries=4).retry_policy.max_attempts == 5
    policy = RetryPolicy(max_attempts=7)
    assert RuntimeConfig(retry=policy, step_retries=1).retry_policy is policy


class OnlyConnectionErrors(Specialist):
    retry = RetryPolicy(max_attempts=4, initial_backoff=0.0, retry_on=(ConnectionError,))

    @handler
    async def work(self, job: Job) -> int:
        return await _work(job)


AGENTS["OnlyConnectionErrors"] = OnlyConnectionErrors


async def test_an_error_retry_on_does_not_match_fails_at_once() -> None:
    attempts, record = await _attempts("OnlyConnectionErrors", Job(fail_first=10))
    assert attempts == [1]  # a ValueError: not a ConnectionError
    assert record.error is not None
    assert record.error.type == "ValueError"


def test_jitter_takes_off_at_most_its_share_and_hints_win() -> None:
    policy = RetryPolicy(initial_backoff=2.0, max_backoff=5.0, multiplier=3.0, jitter=0.5)
    for attempt, full in ((1, 2.0), (2, 5.0), (3, 5.0)):  # 2, then capped at 5
        for _ in range(50):
            assert full * 0.5 <= policy.backoff(attempt) <= full
    assert policy.backoff(1, RetryAfter(30.0)) == 30.0
    assert RetryPolicy(initial_backoff=4.0, max_backoff=4.0).backoff(1, RetryAfter(1.0)) == 4.0


def test_a_config_without_a_policy_still_ships_to_cluster_nodes() -> None:
    # nodes decode the driver's config field by field, each with its type
    from actorflow.ray._spec import decode_config

    shipped = msgspec.msgpack.encode(RuntimeConfig(step_retries=5))
    assert decode_config(shipped).retry_policy.max_attempts == 6
