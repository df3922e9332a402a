"""The agent roles as users rely on them: Orchestrator, Specialist, Evaluator, @phase.

- an Orchestrator is the run: a fresh instance per attempt, ``run`` required;
- a Specialist serves workflow steps: it sees the step (idempotency key),
  reports metrics, and is an ordinary actor outside a run;
- an Evaluator's reply carries a confidence the runtime reads (snapshot
  triggers, the agents' confidence in snapshots); a Specialist's does not;
- a ``@phase`` is memoised: once its end is recorded it never runs again, even
  across a crash and ``recover()``, and its recorded result comes back typed.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from actorflow import (
    Actor,
    CheckpointTriggers,
    Evaluator,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import RunFailedError
from actorflow.storage import MemoryStore, PhaseEndRecord, RunStatus
from actorflow.testing import CrashingStore

# --- role markers ----------------------------------------------------------------------


def test_each_role_is_an_actor_with_its_marker() -> None:
    assert (Orchestrator.role, Specialist.role, Evaluator.role) == (
        "orchestrator",
        "specialist",
        "evaluator",
    )
    assert issubclass(Evaluator, Specialist)
    for role in (Orchestrator, Specialist, Evaluator):
        assert issubclass(role, Actor)

    class Mine(Evaluator):
        __actorflow_name__ = "tests.agents.roles.Mine"

    assert Mine.role == "evaluator", "a subclass keeps its role"


class NoRun(Orchestrator):
    __actorflow_name__ = "tests.agents.roles.NoRun"


async def test_an_orchestrator_without_run_fails_its_run_naming_the_class() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        with pytest.raises(RunFailedError, match="NotImplementedError") as info:
            await runtime.run(NoRun, None, run_id="no-run")
    assert isinstance(info.value.__cause__, NotImplementedError)
    assert "NoRun" in str(info.value.__cause__)


class Instances(Orchestrator):
    __actorflow_name__ = "tests.agents.roles.Instances"
    seen: list[int] = []

    async def run(self, ctx: RunContext, _: None) -> int:
        type(self).seen.append(id(self))
        self.calls = getattr(self, "calls", 0) + 1  # an attribute never survives a run
        return int(self.calls)


async def test_every_run_gets_a_fresh_orchestrator() -> None:
    Instances.seen = []
    async with Runtime(store=MemoryStore()) as runtime:
        assert await runtime.run(Instances, None, run_id="one") == 1
        assert await runtime.run(Instances, None, run_id="two") == 1
    assert len(Instances.seen) == 2


# --- specialists -------------------------------------------------------------------------


class Job(Request["Seen"], frozen=True):
    text: str


class Seen(msgspec.Struct, frozen=True):
    key: str | None
    step_id: str | None


class Worker(Specialist):
    __actorflow_name__ = "tests.agents.roles.Worker"

    @handler
    async def work(self, job: Job) -> Seen:
        self.report(api_calls=1, tokens=len(job.text))
        step = self.step
        return Seen(step.key if step else None, step.step_id if step else None)


class UseWorker(Orchestrator):
    __actorflow_name__ = "tests.agents.roles.UseWorker"

    async def run(self, ctx: RunContext, texts: list[str]) -> list[Seen]:
        worker = await ctx.spawn(Worker, name="worker")
        return [await ctx.ask(worker, Job(t)) for t in texts]


async def test_a_specialist_sees_its_step_and_reports_metrics_into_the_run() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(UseWorker, ["ab", "cde"], run_id="metrics")
        seen = await handle.result()
        metrics = dict(handle.metrics)
    assert all(s.key and s.step_id for s in seen), seen
    assert len({s.key for s in seen}) == 2, "each step has its own idempotency key"
    assert all(s.step_id and s.key and s.key.endswith(s.step_id) for s in seen), seen
    assert metrics.get("api_calls") == 2
    assert metrics.get("tokens") == 5


async def test_a_specialist_outside_a_run_is_an_ordinary_actor() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Worker, name="plain")
        assert await ref.ask(Job("x")) == Seen(None, None)


# --- evaluators: the confidence the runtime reads -----------------------------------------


class Grade(Request["Verdict"], frozen=True):
    score: float


class Verdict(msgspec.Struct, frozen=True):
    confidence: float


class Judge(Evaluator):
    __actorflow_name__ = "tests.agents.roles.Judge"

    @handler
    async def grade(self, g: Grade) -> Verdict:
        return Verdict(g.score)


class Grader(Specialist):
    """Replies with a confidence too, but is no evaluator: the runtime ignores it."""

    __actorflow_name__ = "tests.agents.roles.Grader"

    @handler
    async def grade(self, g: Grade) -> Verdict:
        return Verdict(g.score)


GATE: list[anyio.Event] = []
"""Set by the test once it saw the snapshot it waits for; the run then finishes."""


class Review(Orchestrator):
    __actorflow_name__ = "tests.agents.roles.Review"

    async def run(self, ctx: RunContext, score: float) -> float:
        grader = await ctx.spawn(Grader, name="grader")
        judge = await ctx.spawn(Judge, name="judge")
        await ctx.ask(grader, Grade(score / 2))
        verdict: Verdict = await ctx.ask(judge, Grade(score))
        await GATE[-1].wait()
        return verdict.confidence


@pytest.mark.parametrize(
    ("triggers", "expected"),
    [
        # min_interval=0: a reply right after the run's start snapshot is not put off
        (
            CheckpointTriggers(every_steps=None, every_seconds=None, min_interval=0.0),
            "evaluation",
        ),
        (
            CheckpointTriggers(
                every_steps=None,
                every_seconds=None,
                on_evaluation=False,
                confidence_threshold=0.75,
                min_interval=0.0,
            ),
            "confidence",
        ),
    ],
    ids=["on_evaluation", "confidence_threshold"],
)
async def test_an_evaluators_confidence_is_read_by_the_runtimes_triggers(
    triggers: CheckpointTriggers, expected: str
) -> None:
    GATE.append(anyio.Event())
    store = MemoryStore()
    saved: list[Any] = []
    config = RuntimeConfig(triggers=triggers, retention=None)
    with anyio.fail_after(30):
        async with Runtime(store=store, config=config) as runtime:
            handle = await runtime.start(Review, 0.9, run_id="review")
            # read to the end (the stream ends with the run): leaving it early leaks it
            async for event in handle.events(emits=False):
                if event.name == "checkpoint_saved":
                    saved.append(event)
                    if event["trigger"] == expected:
                        GATE[-1].set()
            assert await handle.result() == 0.9
    triggered = next(e for e in saved if e["trigger"] == expected)
    assert [e["trigger"] for e in saved] == [expected, "completed"], (
        "only the evaluator's reply triggered a snapshot before the run's end"
    )
    snapshot = await store.read_snapshot("review", triggered["snapshot_id"])
    assert snapshot.agents["judge"].confidence == 0.9
    assert snapshot.agents["grader"].confidence is None, "a specialist's confidence is not read"
    final = (await store.list_snapshots("review"))[-1]
    assert final.trigger == "completed"
    last = await store.read_snapshot("review", final.snapshot_id)
    assert last.agents["judge"].confidence == 0.9


# --- @phase -------------------------------------------------------------------------------


class Part(msgspec.Struct, frozen=True):
    text: str
    n: int


class Say(Request["Part"], frozen=True):
    text: str


class Said(msgspec.Struct):
    count: int = 0


BODIES: list[str] = []


class Speaker(Specialist):
    __actorflow_name__ = "tests.agents.roles.Speaker"
    state: Said

    @handler
    async def say(self, m: Say) -> Part:
        self.state.count += 1
        return Part(m.text, self.state.count)


class Phased(Orchestrator):
    __actorflow_name__ = "tests.agents.roles.Phased"

    @phase
    async def first(self, ctx: RunContext, text: str) -> Part:
        """The first phase."""
        BODIES.append("first")
        speaker = await ctx.spawn(Speaker, name="speaker")
        part: Part = await ctx.ask(speaker, Say(text))
        return part

    @phase
    async def second(self, ctx: RunContext, part: Part) -> Part:
        BODIES.append("second")
        speaker = await ctx.spawn(Speaker, name="speaker")
        again: Part = await ctx.ask(speaker, Say(part.text + "!"))
        return again

    async def run(self, ctx: RunContext, text: str) -> list[Part]:
        a = await self.first(ctx, text)
        assert isinstance(a, Part), f"a phase's result comes back as {type(a)}"
        b = await self.second(ctx, a)
        return [a, b]


def test_phase_keeps_the_methods_name_and_doc() -> None:
    assert Phased.first.__name__ == "first"
    assert Phased.first.__doc__ == "The first phase."


async def test_a_phase_called_twice_in_a_run_runs_twice() -> None:
    class Twice(Orchestrator):
        __actorflow_name__ = "tests.agents.roles.Twice"

        @phase
        async def bump(self, ctx: RunContext, text: str) -> Part:
            BODIES.append("bump")
            speaker = await ctx.spawn(Speaker, name="speaker")
            part: Part = await ctx.ask(speaker, Say(text))
            return part

        async def run(self, ctx: RunContext, _: None) -> list[int]:
            return [(await self.bump(ctx, "x")).n, (await self.bump(ctx, "y")).n]

    BODIES.clear()
    async with Runtime(store=MemoryStore()) as runtime:
        assert await runtime.run(Twice, None) == [1, 2]
    assert BODIES == ["bump", "bump"]


async def test_a_finished_phase_never_runs_again_across_a_crash_and_recover() -> None:
    # the uninterrupted run: where its first phase's end lies in the log
    reference = MemoryStore()
    BODIES.clear()
    async with Runtime(store=reference) as runtime:
        expected = await runtime.run(Phased, "hi", run_id="phased")
    assert BODIES == ["first", "second"]
    log = await reference.read_log("phased")
    first_end = next(
        i for i, r in enumerate(log) if isinstance(r, PhaseEndRecord) and r.name == "first"
    )
    # crash as soon as the first phase's end is durable
    inner = MemoryStore()
    crashing = CrashingStore(inner, crash_after=first_end + 1)
    BODIES.clear()
    with anyio.CancelScope() as stop:
        async with Runtime(store=crashing) as runtime:
            await runtime.start(Phased, "hi", run_id="phased")
            await crashing.crashed.wait()
            stop.cancel()
            await anyio.sleep_forever()
    assert BODIES[0] == "first"
    assert (await inner.read_run("phased")).status is RunStatus.RUNNING
    BODIES.clear()
    async with Runtime(store=inner) as runtime:
        results = await runtime.recover()
    assert "first" not in BODIES, "a phase whose end was recorded ran again"
    assert BODIES == ["second"]
    recovered = results["phased"]
    assert recovered == expected == [Part("hi", 1), Part("hi!", 2)]
    assert all(isinstance(p, Part) for p in recovered)
