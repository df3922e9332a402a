"""RunContext steps: ordering, failures, retries, phases, progress, metrics."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import RunFailedError, StepFailedError, UnawaitedStepError
from actorflow.storage import MemoryStore, StepRecord
from actorflow.testing import CrashingStore, crash_and_recover

FAST = RuntimeConfig(retry_backoff=0.0)


class Item(Request[int], frozen=True):
    n: int


class Seen(msgspec.Struct):
    order: list[int] = []


class OrderedSink(Specialist):
    state: Seen

    @handler
    async def take(self, item: Item) -> int:
        self.state.order.append(item.n)
        return item.n * 10


class FanOut(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> list[int]:
        sink = await ctx.spawn(OrderedSink, name="sink")
        return await ctx.gather(*(ctx.ask(sink, Item(i)) for i in range(n)))


async def test_gather_delivers_messages_in_step_order_and_returns_in_argument_order() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        result = await runtime.run(FanOut, 20, run_id="order")
    assert result == [i * 10 for i in range(20)]
    snapshots = await store.list_snapshots("order")
    last = await store.read_snapshot("order", snapshots[-1].snapshot_id)
    state = last.agents["sink"].state
    assert state is not None
    assert state.data is not None
    assert msgspec.msgpack.decode(state.data, type=Seen).order == list(range(20))


class FlakyWorker(Specialist):
    failures: dict[str, int] = {}
    keys: list[str] = []

    @handler
    async def take(self, item: Item) -> int:
        step = self.step
        assert step is not None
        FlakyWorker.keys.append(step.key)
        left = FlakyWorker.failures.get(step.key, item.n)
        if left > 0:
            FlakyWorker.failures[step.key] = left - 1
            raise ValueError(f"flaky {item.n}")
        return item.n


class Retrying(Orchestrator):
    async def run(self, ctx: RunContext, fails: list[int]) -> list[int]:
        worker = await ctx.spawn(FlakyWorker, name="worker")
        return await ctx.gather(*(ctx.ask(worker, Item(n)) for n in fails))


async def test_a_failing_task_is_retried_with_the_same_idempotency_key() -> None:
    FlakyWorker.failures.clear()
    FlakyWorker.keys.clear()
    async with Runtime(store=MemoryStore(), config=FAST) as runtime:
        assert await runtime.run(Retrying, [2], run_id="retry") == [2]
    assert FlakyWorker.keys == ["retry/1"] * 3, "two failures, then success, one key"


async def test_gather_raises_the_first_failure_in_step_order_as_step_failed() -> None:
    FlakyWorker.failures.clear()
    async with Runtime(store=MemoryStore(), config=FAST) as runtime:
        with pytest.raises(RunFailedError) as info:
            await runtime.run(Retrying, [0, 9, 0, 7], run_id="gather-fail")
    cause = info.value.__cause__
    assert isinstance(cause, StepFailedError)
    assert cause.step_id == "2", "the ask for n=9 is the first failing step"
    assert cause.error_type == "ValueError"


class Gates:
    """Per-test events (created inside the test, on its event loop)."""

    retried: anyio.Event
    attempts = 0


class WaitsForTheRetry(Specialist):
    @handler
    async def hold(self, item: Item) -> int:
        await Gates.retried.wait()
        return item.n


class FailsOnce(Specialist):
    @handler
    async def take(self, item: Item) -> int:
        Gates.attempts += 1
        if Gates.attempts == 1:
            raise RuntimeError("transient")
        Gates.retried.set()
        return item.n


class SlowFirst(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> list[int]:
        slow = await ctx.spawn(WaitsForTheRetry, name="slow")
        flaky = await ctx.spawn(FailsOnce, name="flaky")
        return await ctx.gather(ctx.ask(slow, Item(n)), ctx.ask(flaky, Item(n + 1)))


async def test_a_failed_ask_in_a_gather_is_retried_without_waiting_for_earlier_ones() -> None:
    # the first ask answers only once the second one's retry succeeded: a
    # retry that waited for the earlier replies would never come
    Gates.retried, Gates.attempts = anyio.Event(), 0
    async with Runtime(store=MemoryStore(), config=FAST) as runtime:
        with anyio.fail_after(10):
            assert await runtime.run(SlowFirst, 1, run_id="slow-first") == [1, 2]
    assert Gates.attempts == 2


class AppendWatch(MemoryStore):
    """Sets ``quick_durable`` once the record of an ask to ``quick`` is appended."""

    def __init__(self) -> None:
        super().__init__()
        self.quick_durable = anyio.Event()

    async def append(self, run_id: str, records: Any) -> int:
        end = await super().append(run_id, records)
        if any(
            isinstance(r, StepRecord) and r.kind == "ask" and r.target == "quick" for r in records
        ):
            self.quick_durable.set()
        return end


class WaitsForQuickRecord(Specialist):
    store: AppendWatch

    @handler
    async def hold(self, item: Item) -> int:
        await WaitsForQuickRecord.store.quick_durable.wait()
        return item.n


class Quick(Specialist):
    @handler
    async def take(self, item: Item) -> int:
        return item.n


class SlowThenQuick(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> list[int]:
        slow = await ctx.spawn(WaitsForQuickRecord, name="slow")
        quick = await ctx.spawn(Quick, name="quick")
        return await ctx.gather(ctx.ask(slow, Item(n)), ctx.ask(quick, Item(n + 1)))


async def test_in_sync_mode_a_gathered_ask_is_durable_once_answered_not_once_all_are() -> None:
    # the first ask answers only once the second one's record is in the log
    store = WaitsForQuickRecord.store = AppendWatch()
    config = RuntimeConfig.from_env({"ACTORFLOW_DURABILITY": "sync"})
    async with Runtime(store=store, config=config) as runtime:
        with anyio.fail_after(10):
            assert await runtime.run(SlowThenQuick, 1, run_id="slow-quick") == [1, 2]


class Broken(Specialist):
    failing = True

    @handler
    async def take(self, item: Item) -> int:
        if Broken.failing:
            raise ValueError(f"broken {item.n}")
        return item.n


class Tolerant(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> str:
        worker = await ctx.spawn(Broken, name="worker")
        try:
            await ctx.ask(worker, Item(n))
        except StepFailedError as exc:
            return f"{exc.step_id}:{exc.error_type}:{exc.error_message}"
        return "ok"


async def test_a_recorded_failure_replays_as_the_same_step_failed_error() -> None:
    config = RuntimeConfig(retry_backoff=0.0, step_retries=0)
    inner = MemoryStore()
    crashing = CrashingStore(inner, crash_after=2)  # the spawn, then the failed ask
    Broken.failing = True
    async with Runtime(store=crashing, config=config) as runtime:
        handle = await runtime.start(Tolerant, 5, run_id="replayed-failure")
        await crashing.crashed.wait()
        handle.cancel()
    Broken.failing = False  # were the step run again, it would now succeed
    async with Runtime(store=inner, config=config) as runtime:
        results = await runtime.recover()
    assert results == {"replayed-failure": "1:ValueError:broken 5"}


class Leaky(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> None:
        sink = await ctx.spawn(OrderedSink, name="sink")
        ctx.ask(sink, Item(1))  # issued, never awaited


async def test_a_step_never_awaited_is_an_error_at_the_end_of_its_phase() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        with pytest.raises(RunFailedError) as info:
            await runtime.run(Leaky, None)
    assert isinstance(info.value.__cause__, UnawaitedStepError)
    assert info.value.__cause__.step_ids == ["1"]


class Attempts(Orchestrator):
    tries = 0

    @phase
    async def work(self, ctx: RunContext, _: None) -> str:
        sink = await ctx.spawn(OrderedSink, name="sink")
        n = await ctx.ask(sink, Item(len(ctx.metrics)))
        Attempts.tries += 1
        if Attempts.tries < 3:
            ctx.retry_phase()
        return f"done after {Attempts.tries} with {n}"

    async def run(self, ctx: RunContext, _: None) -> str:
        return await self.work(ctx, None)


async def test_retry_phase_starts_the_phase_over_with_new_step_ids() -> None:
    Attempts.tries = 0
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        assert (await runtime.run(Attempts, None, run_id="attempts")).startswith("done after 3")
    ids = [r.step_id for r in await store.read_log("attempts") if isinstance(r, StepRecord)]
    assert ids == ["work.0/0", "work.0/1", "work.0@1/0", "work.0@1/1", "work.0@2/0", "work.0@2/1"]


class Progress(msgspec.Struct):
    done: int


class Resumable(Specialist):
    attempts: list[int | None] = []

    @handler
    async def take(self, item: Item) -> int:
        start = self.load_progress(Progress)
        Resumable.attempts.append(start.done if start else None)
        for i in range(start.done if start else 0, item.n):
            await self.save_progress(Progress(i + 1))
            self.report(tokens=1)
            if i == 2 and start is None:
                raise RuntimeError("crashed mid-task")
        return item.n


class UsesProgress(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> float:
        worker = await ctx.spawn(Resumable, name="worker")
        await ctx.ask(worker, Item(n))
        return ctx.metrics["tokens"]


async def test_a_retried_task_continues_from_its_last_milestone() -> None:
    Resumable.attempts.clear()
    async with Runtime(store=MemoryStore(), config=FAST) as runtime:
        tokens = await runtime.run(UsesProgress, 6)
    assert Resumable.attempts == [None, 3]
    assert tokens == 3, "metrics come from the recorded (successful) step"


class Values(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> tuple[float, float, str]:
        now = await ctx.now()
        r = await ctx.random()
        await ctx.sleep(0)
        u = await ctx.uuid()
        return now, r, u


@pytest.mark.parametrize("crash_after", [1, 2, 3])
async def test_values_that_differ_between_runs_are_recorded_and_replayed(crash_after: int) -> None:
    store = MemoryStore()
    outcome = await crash_and_recover(Values, None, crash_after=crash_after, store=store)
    recorded = [r for r in await store.read_log("crash-test") if isinstance(r, StepRecord)]
    assert [r.kind for r in recorded] == ["now", "random", "sleep", "uuid"]
    now, r, u = outcome.recovered
    assert msgspec.msgpack.decode(recorded[0].result or b"", type=float) == now
    assert msgspec.msgpack.decode(recorded[3].result or b"", type=str) == u
    assert r == outcome.expected[1], "random is seeded by run and step id"


class Hopeless(Specialist):
    @handler
    async def take(self, item: Item) -> int:
        raise OSError(f"disk {item.n} is gone")


class Escalating(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> str:
        worker = await ctx.spawn(Hopeless, name="hopeless")
        try:
            await ctx.ask(worker, Item(n))
        except StepFailedError as exc:
            first = exc.error_type
        try:
            await ctx.ask(worker, Item(n + 1))
        except StepFailedError as exc:
            return f"{first} then {exc.error_type}"
        return "unreachable"


async def test_an_agent_over_its_restart_budget_fails_steps_not_the_runtime() -> None:
    from actorflow import SupervisorPolicy

    config = RuntimeConfig(retry_backoff=0.0, step_retries=3)
    policy = SupervisorPolicy(max_restarts=1, within=60.0, backoff=0.0)
    async with Runtime(store=MemoryStore(), config=config, supervisor=policy) as runtime:
        assert await runtime.run(Escalating, 1) == "OSError then MailboxClosedError"


class Broadcast(Orchestrator):
    @phase
    async def notify(self, ctx: RunContext, n: int) -> None:
        sink = await ctx.spawn(OrderedSink, name="sink")
        for i in range(n):
            await ctx.send(sink, Item(i))

    async def run(self, ctx: RunContext, n: int) -> None:
        await self.notify(ctx, n)


async def test_send_is_recorded_once_handled_and_its_phase_waits_for_it() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(Broadcast, 5, run_id="broadcast")
    log = await store.read_log("broadcast")
    sends = [r for r in log if isinstance(r, StepRecord) and r.kind == "send"]
    assert [r.step_id for r in sends] == [f"notify.0/{i}" for i in range(1, 6)]
    last = sends[-1].state
    assert last is not None
    assert last.data is not None
    assert msgspec.msgpack.decode(last.data, type=Seen).order == [0, 1, 2, 3, 4]
    phase_end = next(i for i, r in enumerate(log) if not isinstance(r, StepRecord))
    assert phase_end > log.index(sends[-1]), "the phase ends after every send was handled"


class Napper(Orchestrator):
    async def run(self, ctx: RunContext, seconds: float) -> str:
        sink = await ctx.spawn(OrderedSink, name="sink")
        await ctx.sleep(seconds)
        await ctx.ask(sink, Item(1))
        return "rested"


async def test_a_durable_timer_is_not_reset_by_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    import types

    import anyio

    from actorflow.runtime.workflow.steps import _values

    store = MemoryStore()
    crashing = CrashingStore(store, crash_after=2)  # the spawn, then the timer's deadline
    async with Runtime(store=crashing) as runtime:
        handle = await runtime.start(Napper, 3600.0, run_id="nap")
        await crashing.crashed.wait()
        handle.cancel()
    # An hour later (a fake clock): the recorded deadline has passed, so the
    # recovered run goes on at once; a timer started afresh would wait an hour.
    later = time.time() + 3601
    monkeypatch.setattr(_values, "time", types.SimpleNamespace(time=lambda: later))
    async with Runtime(store=store) as runtime:
        with anyio.fail_after(10):
            assert await runtime.recover() == {"nap": "rested"}


class BadDecision(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> None:
        await ctx.decide("pick", confidence="high", alternatives=["a", 2])  # type: ignore[arg-type, list-item]


async def test_a_decision_with_wrong_types_fails_at_once_not_at_recovery() -> None:
    from actorflow.errors import EncodingError

    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunFailedError, match="EncodingError") as info:
            await runtime.run(BadDecision, None, run_id="bad-decision")
    assert isinstance(info.value.__cause__, EncodingError)
    assert "decision 'pick'" in str(info.value.__cause__)
    # nothing but the failed run's end: the decision never reached the log
    assert [r.kind for r in await store.read_log("bad-decision")] == ["run_end"]  # type: ignore[union-attr]
