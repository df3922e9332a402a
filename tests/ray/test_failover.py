"""A node or the driver dies in the middle of runs: every run completes as if nothing happened.

Each agent execution is in a side file (step key, process id). When the node
is removed, the log records every run has from the attempts before the
removal are read at once (its processes are dead, so nothing more of theirs
can land; a survivor may have taken a run over already and recorded steps of
its own, under a later attempt); afterwards, each of those steps must have
executed exactly once, and every run must return what an uninterrupted run
returns.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import Runtime
from actorflow.ray import RayCluster
from actorflow.storage import StepRecord
from tests.ray.app import RayJob, RayPipeline, executions, expected, wait_until
from tests.ray.conftest import ROOT
from tests.ray.test_hosts import on_cluster

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow import RunHandle
    from actorflow.storage import Store
    from tests.ray.conftest import LocalCluster, SharedStore

pytestmark = pytest.mark.usefixtures("ray_cluster")

STEPS = 8
PAUSE = 0.25


async def attempts(store: Store, run_ids: list[str]) -> dict[str, int]:
    """Each run's attempt now: a later one is a take-over's."""
    return {run_id: (await store.read_run(run_id)).attempt for run_id in run_ids}


async def recorded_keys(
    store: Store, run_ids: list[str], before: dict[str, int] | None = None
) -> set[str]:
    """The idempotency keys of every agent step the runs' logs hold now (recorded by an
    attempt up to ``before``'s, if given)."""
    keys = set()
    for run_id in run_ids:
        for record in await store.read_log(run_id):
            if not (isinstance(record, StepRecord) and record.kind == "ask"):
                continue
            attempt = record.run_attempt or 0
            if before is None or attempt <= before[run_id]:
                keys.add(f"{run_id}/{record.step_id}")
    return keys


async def wait_for_work(side: str, runs: int, pids: set[int] | None = None) -> set[str]:
    """Wait until processes ``pids`` (any) ran steps of ``runs`` different runs; their run ids."""
    seen: set[str] = set()

    async def enough() -> bool:
        done = executions(side)
        seen.update(key.split("/")[0] for key, pid in done if pids is None or pid in pids)
        return len(seen) >= runs

    await wait_until(enough)
    return seen


async def wait_for_records(store: Store, run_ids: set[str], steps: int) -> None:
    """Wait until the runs' logs hold ``steps`` agent steps in all (their work is durable)."""

    async def enough() -> bool:
        return len(await recorded_keys(store, sorted(run_ids))) >= steps

    await wait_until(enough)


async def finish_after_loss(
    runtime: Runtime, handles: list[RunHandle], side: str, lost_steps: set[str]
) -> None:
    assert lost_steps, "the node died with work recorded"
    results = [await handle.result() for handle in handles]
    assert results == [expected(STEPS)] * len(handles)
    counts = collections.Counter(key for key, _ in executions(side))
    again = sorted(key for key in lost_steps if counts[key] != 1)
    assert not again, f"steps with a log record ran again: {again}"


async def test_a_hosts_node_removed_mid_run_loses_no_run(
    tmp_path: Path, namespace: str, ray_cluster: LocalCluster, shared_store: SharedStore
) -> None:
    side = str(tmp_path / "side")
    with anyio.fail_after(180):
        async with on_cluster(shared_store, namespace) as (runtime, cluster):
            job = RayJob(steps=STEPS, side=side, pause=PAUSE)
            handles = [await runtime.start(RayPipeline, job) for _ in range(6)]
            # a host not on the head node, once it drives runs (an adopter may take a
            # queued run before the host it was dispatched to: the spread is not exact)
            off_head = {i.pid: i for i in cluster.host_info if not ray_cluster.is_head(i.node_id)}
            await wait_for_work(side, runs=1, pids=set(off_head))
            victim = off_head[next(pid for _, pid in executions(side) if pid in off_head)]
            hosted = await wait_for_work(side, runs=1, pids={victim.pid})
            await wait_for_records(runtime.store, hosted, steps=len(hosted))
            node = ray_cluster.node(victim.node_id)
            run_ids = [h.run_id for h in handles]
            before = await attempts(runtime.store, run_ids)
            ray_cluster.remove(node)  # blocks this loop briefly: Ray wants the main thread
            lost_steps = await recorded_keys(runtime.store, run_ids, before)
            ray_cluster.add_like(node)
            await finish_after_loss(runtime, handles, side, lost_steps)
            survivors = {pid for key, pid in executions(side) if key.split("/")[0] in hosted}
            assert survivors - {victim.pid}, "the victim's runs went on in another process"


async def test_a_placed_agents_node_removed_mid_run_loses_no_run(
    tmp_path: Path, namespace: str, ray_cluster: LocalCluster
) -> None:
    side = str(tmp_path / "side")
    with anyio.fail_after(180):
        async with on_cluster(tmp_path / "store", namespace) as (runtime, _):
            job = RayJob(steps=STEPS, side=side, pause=PAUSE, placed=True)
            handles = [await runtime.start(RayPipeline, job) for _ in range(3)]
            await wait_for_records(runtime.store, await wait_for_work(side, runs=3), steps=3)
            node = ray_cluster.special
            ray_cluster.remove(node)  # blocks this loop briefly: Ray wants the main thread
            placed_pids = {pid for _, pid in executions(side)}  # all on the lost node
            lost_steps = await recorded_keys(runtime.store, [h.run_id for h in handles])
            ray_cluster.add_like(node)
            await finish_after_loss(runtime, handles, side, lost_steps)
            later = {pid for _, pid in executions(side)} - placed_pids
            assert later, "the placed agents went on in a new Ray actor"


# --- the driver dies -------------------------------------------------------------------


async def test_a_new_driver_attaches_to_runs_after_the_first_is_killed(
    tmp_path: Path, namespace: str, ray_cluster: LocalCluster, anyio_backend: str
) -> None:
    store, side = str(tmp_path / "store"), str(tmp_path / "side")

    async def under_way() -> bool:
        return len({key.split("/")[0] for key, _ in executions(side)}) >= 3

    args = [ray_cluster.address, namespace, store, side, "3", anyio_backend]
    child = subprocess.Popen(  # noqa: ASYNC220  # its stdout is read line by line below
        [sys.executable, "-m", "tests.ray.driver_child", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        stdout=subprocess.PIPE,
        text=True,
    )
    cluster = RayCluster(namespace=namespace, imports=("tests.ray.app",), store=store)
    try:
        with anyio.fail_after(120):
            assert child.stdout is not None
            lines = []
            while (line := await anyio.to_thread.run_sync(child.stdout.readline)) != "started\n":
                assert line, "the driver exited before it started its runs"
                lines.append(line.strip())
            await wait_until(under_way)  # every run is under way on the hosts
            child.send_signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(child.wait)
            async with Runtime(store=store, cluster=cluster) as runtime:
                handles = [await runtime.follow(run_id) for run_id in lines]
                results = [await handle.result() for handle in handles]
        assert results == [expected(8)] * 3
        counts = collections.Counter(key for key, _ in executions(side))
        assert set(counts.values()) == {1}  # nothing ran twice: the hosts never stopped
        assert {key.split("/")[0] for key in counts} == set(lines)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        with anyio.CancelScope(shield=True):
            await cluster.stop_hosts()
