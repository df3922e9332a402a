"""Durable workflows survive real crashes: child processes killed with SIGKILL, then recovered.

A child (``tests/runtime/workflow/crash_child.py``) runs ``CrashPipeline`` (five
phases, fan-out to four analysts, an evaluator loop calling a phase again,
decisions, ``ctx.random``) on a FileStore (or a SqliteStore); its specialists
append every execution to a side file (fsync'd) and print it. The parent kills the child
with SIGKILL after a random number of executions (seeded; the seed is
printed, set ``CRASH_TEST_SEED`` to replay one), recovers in a new child,
kills that one too, and so on. Then:

- the result equals that of a run that was never killed;
- no ask step whose record was in the log when a process started was
  executed by that process;
- the store opens cleanly and ``verify_store`` finds nothing corrupt.

Kills: 8 per (backend, durability) run of the main test (32), one per
backend for 100 concurrent runs (2) and for the corrupt-snapshot test (2),
plus 6 self-kills in the run that dies on every attempt.
"""

from __future__ import annotations

import functools
import os
import random
import signal
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import pytest

from actorflow import Runtime
from actorflow.errors import RunFailedError, RunPaused
from actorflow.storage import MemoryStore, RunStatus, verify_store
from tests.runtime.workflow import crash_workflow
from tests.runtime.workflow.crash_child import named_many, open_crash_store
from tests.runtime.workflow.crash_parent import (
    child_env,
    durable_asks,
    executions,
    reran,
    run_child,
    run_exists,
)
from tests.runtime.workflow.crash_workflow import (
    AREAS,
    SMALL,
    CrashApproval,
    CrashPipeline,
    CrashSummary,
)

if TYPE_CHECKING:
    from pathlib import Path

BACKENDS = ["asyncio", "trio"]
KILLS_PER_RUN = 8
MAX_ROUNDS = 20
MANY_RECOVERY = "1000"  # recovery attempts allowed when the test kills recovering children


def new_seed() -> int:
    seed = int(os.environ.get("CRASH_TEST_SEED") or int.from_bytes(os.urandom(4), "big"))
    print(f"crash test seed: {seed} (CRASH_TEST_SEED={seed} replays it)")
    return seed


def summary(value: Any) -> CrashSummary:
    return msgspec.convert(value, CrashSummary)


async def _uninterrupted(workflow: type[Any], areas: list[str], run_ids: list[str]) -> Any:
    keys: list[str] = []
    crash_workflow.ON_EXECUTION = keys.append
    store = MemoryStore()
    results: dict[str, Any] = {}
    paused = []
    try:
        async with Runtime(store=store) as runtime:
            handles = [await runtime.start(workflow, areas, run_id=r) for r in run_ids]
            for handle in handles:
                try:
                    results[handle.run_id] = await handle.result()
                except RunPaused:
                    paused.append(handle.run_id)
        # A new runtime resumes: see test_resume_right_after_the_pause_in_the_same_runtime.
        async with Runtime(store=store) as runtime:
            for run_id in paused:
                results[run_id] = await runtime.resume(run_id, "yes")
    finally:
        crash_workflow.ON_EXECUTION = None
    return results, keys


@functools.cache
def expected(workflow: type[Any], areas: tuple[str, ...], run_ids: tuple[str, ...]) -> Any:
    """Results of runs never killed (``ctx.random`` depends on the run id) and their executions."""
    return anyio.run(_uninterrupted, workflow, list(areas), list(run_ids))


async def _check_store(store: Path, run_ids: list[str]) -> None:
    files = open_crash_store(store)
    try:
        assert await verify_store(files) == []
        for run_id in run_ids:
            assert (await files.read_run(run_id)).status is RunStatus.COMPLETED
            await files.read_log(run_id)
            lease = await files.claim(run_id, "checker")  # the dead children's locks are gone
            await files.release(lease)
    finally:
        await files.aclose()


async def _stored_results(store: Path, run_ids: list[str]) -> dict[str, Any]:
    async with Runtime(store=open_crash_store(store)) as runtime:
        return {r: await runtime.result(r) for r in run_ids}


def stored_results(store: Path, run_ids: list[str]) -> dict[str, Any]:
    """Every run's result as the store holds it."""
    return anyio.run(_stored_results, store, run_ids)


async def _corruption(store: Path) -> list[str]:
    files = open_crash_store(store)
    try:
        return [str(e) for e in await verify_store(files)]
    finally:
        await files.aclose()


def corruption(store: Path) -> list[str]:
    """What ``verify_store`` reports (a killed child must never leave corrupt data listed)."""
    return anyio.run(_corruption, store) if store.exists() else []


def check_store(store: Path, run_ids: list[str]) -> None:
    """The store opens cleanly, nothing in it is corrupt, every run completed."""
    anyio.run(_check_store, store, run_ids)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["file", "sqlite"])
@pytest.mark.parametrize("durability", ["batched", "sync"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_killed_again_and_again_a_run_ends_with_the_uninterrupted_result(
    tmp_path: Path, backend: str, durability: str, kind: str
) -> None:
    """On the file store, and on SqliteStore (killed mid-commit: one file, no torn tail)."""
    rng = random.Random(new_seed())
    run_id = f"kill-{durability}"
    results, keys = expected(CrashPipeline, tuple(AREAS), (run_id,))
    total = len(set(keys))
    store = tmp_path / ("store.db" if kind == "sqlite" else "store")
    env = child_env(ACTORFLOW_DURABILITY=durability, ACTORFLOW_MAX_RECOVERY_ATTEMPTS=MANY_RECOVERY)
    durable_at_start: dict[int, set[str]] = {}
    kills, final = 0, None
    # The run must not end before the kill lands. In `sync` mode the child holds
    # the execution the kill waits for (every step answered before it is durable
    # already); in `batched` mode the rest of its gather would never be flushed
    # then, so the kill leaves two steps or more to run instead.
    hold = durability == "sync"
    margin = 1 if hold else 2
    # and the first kill comes once some steps are durable: in `sync` mode any
    # answered one; in `batched` mode the first gather's, flushed before the
    # evaluator's message leaves (the step after the analyses)
    first = total // 2 if hold else len(AREAS) + 1
    for _ in range(MAX_ROUNDS):
        durable = durable_asks(store, [run_id])
        assert corruption(store) == []
        mode = "recover" if run_exists(store, run_id) else "start"
        kill_after = None
        if kills == 0:
            # The first kill lands past the middle, so later processes surely
            # start with recorded steps (what the exactly-once check is about).
            kill_after = rng.randint(first, total - margin)
        elif kills < KILLS_PER_RUN:
            # Before the last step still to run: a kill at 0 lands while recovery loads.
            kill_after = rng.randint(0, max(total - len(durable) - margin, 0))
        outcome = run_child(store, run_id, backend, mode, kill_after=kill_after, hold=hold, env=env)
        durable_at_start[outcome.pid] = durable
        if not outcome.killed:
            final = outcome
            break
        kills += 1
    done = executions(store)
    print(f"{kills} kills, {len(done)} executions of {total} steps")
    assert final is not None, f"no recovery finished in {MAX_ROUNDS} rounds"
    assert kills >= 3, "several kills per run"
    # under load a kill can land after the run ended: the last child then finds
    # it completed, with nothing left to recover, and its stored result counts
    assert summary(final.results.get(run_id, final.stored[run_id])) == results[run_id]
    assert any(durable_at_start.values()), "some process started with recorded steps"
    assert reran(store, durable_at_start) == [], "a step with a durable record ran again"
    assert durable_asks(store, [run_id]) == set(keys), "every step was recorded"
    assert set(keys) <= {key for _, key in done}, "every recorded step was executed"
    check_store(store, [run_id])


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_hundred_concurrent_runs_killed_together_recover_together(
    tmp_path: Path, backend: str
) -> None:
    rng = random.Random(new_seed())
    ids = named_many("many")
    results, keys = expected(CrashPipeline, tuple(SMALL), tuple(ids))
    store = tmp_path / "store"
    env = child_env(ACTORFLOW_MAX_RECOVERY_ATTEMPTS=MANY_RECOVERY)
    first = run_child(
        store,
        "many",
        backend,
        "start-many",
        kill_after=rng.randint(1, len(keys) // 2),
        after_started=True,
        env=env,
    )
    assert first.killed
    durable = durable_asks(store, ids)
    print(f"killed after {len(first.executed)} executions, {len(durable)} recorded")
    assert len(durable) < len(set(keys)), "the kill landed before the runs finished"
    second = run_child(store, "many", backend, "recover", env=env)
    assert all(second.statuses[r] == "completed" for r in ids)
    assert len(second.results) > 50, "most runs were still running at the kill"
    assert {r: summary(v) for r, v in second.results.items()} == {
        r: results[r] for r in second.results
    }
    # Runs that finished before the kill are not orphans: their results come from the store.
    assert stored_results(store, ids) == results
    assert reran(store, {first.pid: set(), second.pid: durable}) == []
    check_store(store, ids)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_paused_run_is_resumed_by_another_process(tmp_path: Path, backend: str) -> None:
    results, _ = expected(CrashApproval, tuple(SMALL), ("approve",))
    store = tmp_path / "store"
    first = run_child(store, "approve", backend, "pause")
    assert first.results["approve"] == {"paused": "approve", "prompt": "approve?"}
    assert first.statuses["approve"] == "paused"
    durable = durable_asks(store, ["approve"])
    assert len(durable) == len(SMALL), "every analysis before the pause is recorded"
    second = run_child(store, "approve", backend, "resume")
    assert second.pid != first.pid
    assert summary(second.results["approve"]) == results["approve"]
    assert summary(second.results["approve"]).draft.text.startswith("yes: ")
    assert second.executed == ["approve/finish.0/1"], "only the steps after the pause ran"
    assert reran(store, {first.pid: set(), second.pid: durable}) == []
    check_store(store, ["approve"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_that_crashes_on_every_attempt_ends_failed(tmp_path: Path, backend: str) -> None:
    store = tmp_path / "store"
    env = child_env(ACTORFLOW_MAX_RECOVERY_ATTEMPTS="2")
    die_key = "doomed/analyse.0/7"  # the analysis of crash_workflow.DIE, on every attempt
    outcomes = [run_child(store, "doomed", backend, "die", env=env)]
    for _ in range(2):
        outcomes.append(run_child(store, "doomed", backend, "recover", env=env))
    for outcome in outcomes:
        assert not outcome.killed
        assert outcome.returncode == -signal.SIGKILL, "the child killed itself"
        assert outcome.executed.count(die_key) == 1
    gives_up = run_child(store, "doomed", backend, "recover", env=env)
    assert gives_up.returncode == 0
    assert gives_up.results == {}
    assert gives_up.statuses["doomed"] == "failed"
    assert gives_up.executed == [], "the third recovery marks the run failed without running it"
    again = run_child(store, "doomed", backend, "recover", env=env)
    assert again.results == {}, "a failed run is not recovered again"
    assert again.executed == []

    async def cause() -> None:
        async with Runtime(store=open_crash_store(store)) as runtime:
            with pytest.raises(RunFailedError, match="max_recovery_attempts=2"):
                await runtime.result("doomed")

    anyio.run(cause)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_corrupt_newest_snapshot_falls_back_to_the_one_before(
    tmp_path: Path, backend: str
) -> None:
    rng = random.Random(new_seed())
    results, _ = expected(CrashPipeline, tuple(AREAS), ("corrupt",))
    store = tmp_path / "store"
    # held, the run cannot end before the kill lands (it would then need no recovery)
    first = run_child(
        store,
        "corrupt",
        backend,
        "start",
        kill_after=rng.randint(11, 14),
        min_snapshots=2,
        hold=True,
    )
    assert first.killed

    async def snapshots() -> list[str]:
        files = open_crash_store(store)
        try:
            return [s.snapshot_id for s in await files.list_snapshots("corrupt")]
        finally:
            await files.aclose()

    listed = anyio.run(snapshots)
    assert len(listed) >= 2
    newest, before = listed[-1], listed[-2]
    (path,) = (store / "runs" / "corrupt" / "snapshots").glob(f"*_{newest}~*.ckpt")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    durable = durable_asks(store, ["corrupt"])

    second = run_child(store, "corrupt", backend, "recover")
    assert summary(second.results["corrupt"]) == results["corrupt"]
    events = second.report["events"]["corrupt"] if second.report else []
    corrupted = [e["snapshot_id"] for e in events if e["event"] == "checkpoint_corrupted"]
    restored = [e["snapshot_id"] for e in events if e["event"] == "checkpoint_restored"]
    assert corrupted == [newest]
    assert restored == [before]
    assert reran(store, {first.pid: set(), second.pid: durable}) == []

    async def verify() -> None:
        files = open_crash_store(store)
        try:
            found = await verify_store(files)
        finally:
            await files.aclose()
        # Still listed (unless retention pruned it): the only corruption is the one we made.
        assert all(newest in e.location for e in found)

    anyio.run(verify)


def test_resume_right_after_the_pause_in_the_same_runtime() -> None:
    # Regression: the handle once finished before the run's claim was released.
    async def pause_then_resume() -> Any:
        async with Runtime(store=MemoryStore()) as runtime:
            with pytest.raises(RunPaused):
                await runtime.run(CrashApproval, SMALL, run_id="same")
            return await runtime.resume("same", "yes")

    assert summary(anyio.run(pause_then_resume)).draft.text.startswith("yes: ")
