"""Recovery: crash at every point of a run, recover, same result, no recorded step redone."""

from __future__ import annotations

import pytest

from actorflow import Runtime, RuntimeConfig
from actorflow.storage import MemoryStore, RunStatus, StepRecord
from actorflow.testing import CrashingStore, crash_and_recover, run_in_memory
from tests.runtime.workflow import workflows
from tests.runtime.workflow.workflows import AREAS, Pipeline


async def test_uninterrupted_pipeline_runs_every_phase() -> None:
    workflows.EXECUTIONS.clear()
    summary = await run_in_memory(Pipeline, AREAS)
    assert summary.rounds >= 2, "the evaluator loop calls the analyse phase again"
    assert len(summary.analyses) == len(AREAS)
    # the second call of the analyse phase has its own step ids
    assert any("/analyse.1/" in e for e in workflows.EXECUTIONS)


@pytest.mark.parametrize("durability", ["sync", "batched", "phase"])
async def test_a_crash_at_every_point_of_the_log_recovers_the_uninterrupted_result(
    durability: str,
) -> None:
    config = RuntimeConfig.from_env({"ACTORFLOW_DURABILITY": durability})
    crash_after, points = 1, 0
    while True:
        outcome = await crash_and_recover(Pipeline, AREAS, crash_after=crash_after, config=config)
        if not outcome.crashed:
            break  # past the end of the log: every point was tried
        assert outcome.recovered == outcome.expected, f"crash after {crash_after} records"
        crash_after, points = crash_after + 1, points + 1
    assert points >= 30


@pytest.mark.parametrize("crash_after", [9, 14, 21, 27])
async def test_steps_recorded_before_the_crash_never_run_again(crash_after: int) -> None:
    inner = MemoryStore()
    crashing = CrashingStore(inner, crash_after=crash_after)
    workflows.EXECUTIONS.clear()
    async with Runtime(store=crashing) as runtime:
        handle = await runtime.start(Pipeline, AREAS, run_id="exactly-once")
        await crashing.crashed.wait()
        handle.cancel()
    durable = {
        f"exactly-once/{r.step_id}"
        for r in await inner.read_log("exactly-once")
        if isinstance(r, StepRecord) and r.kind == "ask"
    }
    assert durable, "the crash point is after some agent work"
    before = list(workflows.EXECUTIONS)
    workflows.EXECUTIONS.clear()
    async with Runtime(store=inner) as runtime:
        results = await runtime.recover()
    after = list(workflows.EXECUTIONS)
    assert "exactly-once" in results
    assert durable.isdisjoint(after), "a step with a durable record ran again"
    # Together the two processes did each step at least once.
    final = {
        f"exactly-once/{r.step_id}"
        for r in await inner.read_log("exactly-once")
        if isinstance(r, StepRecord) and r.kind == "ask"
    }
    assert final <= set(before) | set(after)


async def test_a_run_id_names_one_run() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        first = await runtime.run(Pipeline, AREAS, run_id="once")
        workflows.EXECUTIONS.clear()
        again = await runtime.run(Pipeline, AREAS, run_id="once")
    assert again == first
    assert workflows.EXECUTIONS == [], "a completed run's result comes back from the store"


async def test_interrupted_run_is_recovered_by_a_new_runtime() -> None:
    inner = MemoryStore()
    crashing = CrashingStore(inner, crash_after=10)
    async with Runtime(store=crashing) as runtime:
        handle = await runtime.start(Pipeline, AREAS, run_id="r1")
        await crashing.crashed.wait()
        handle.cancel()
        await handle.wait()
    manifest = await inner.read_run("r1")
    assert manifest.status is RunStatus.RUNNING
    async with Runtime(store=inner) as runtime:
        results = await runtime.recover()
    assert set(results) == {"r1"}
    assert (await inner.read_run("r1")).status is RunStatus.COMPLETED
