"""Hosts drive runs and placed agents on a real local Ray cluster, from asyncio and trio;
bad input names its error and loses no run."""

from __future__ import annotations

import collections
import contextlib
import importlib
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow import ActorRef, AdoptionPolicy, RunStatus, Runtime, RuntimeConfig
from actorflow.errors import (
    ActorStoppedError,
    ClassNotShippedError,
    HostsOutdatedError,
    HostStartError,
    RunFailedError,
    UnhandledMessageError,
)
from actorflow.ray import PlacedRef, RayCluster
from actorflow.storage import MilestoneRecord
from tests.ray.app import (
    RayCount,
    RayGated,
    RayGo,
    RayJob,
    RayLazyPipeline,
    RayPipeline,
    RayPlacedWorker,
    RayResult,
    RayResuming,
    RayTask,
    executions,
    expected,
    wait_until,
)
from tests.ray.conftest import ROOT, SharedStore
from tests.ray.unshipped import RayUnshipped

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from actorflow.ray import HostInfo
    from tests.ray.conftest import LocalCluster

pytestmark = pytest.mark.usefixtures("ray_cluster")

IMPORTS = ("tests.ray.app",)


@contextlib.asynccontextmanager
async def hosts_stopped(cluster: RayCluster) -> AsyncIterator[RayCluster]:
    """``cluster``, with its namespace's hosts stopped at the end whatever happened."""
    try:
        yield cluster
    finally:
        with anyio.CancelScope(shield=True):
            await cluster.stop_hosts()


def unreachable_store(namespace: str) -> RayCluster:
    """A cluster whose hosts are given a store nothing answers for: they cannot start."""
    return RayCluster(
        hosts=1,
        namespace=namespace,
        store="s3://nowhere/runs",
        store_options={"endpoint_url": "http://127.0.0.1:9", "max_attempts": 1},
    )


@contextlib.asynccontextmanager
async def on_cluster(
    store: Path | SharedStore, namespace: str, *, hosts: int = 2
) -> AsyncIterator[tuple[Runtime, RayCluster]]:
    """A driver runtime on the test cluster; its hosts are stopped at the end."""
    shared = store if isinstance(store, SharedStore) else SharedStore(str(store))
    cluster = RayCluster(
        hosts=hosts,
        namespace=namespace,
        imports=IMPORTS,
        store=None if shared.by_url else shared.location,
        store_options=shared.options,
    )
    driver_store = shared.open()
    try:
        async with hosts_stopped(cluster), Runtime(store=driver_store, cluster=cluster) as runtime:
            yield runtime, cluster
    finally:
        with anyio.CancelScope(shield=True):
            await driver_store.aclose()


async def test_runs_spread_over_hosts_and_finish(
    tmp_path: Path, namespace: str, shared_store: SharedStore
) -> None:
    side = str(tmp_path / "side")
    with anyio.fail_after(120):
        async with on_cluster(shared_store, namespace) as (runtime, cluster):
            infos: list[HostInfo] = cluster.host_info
            assert len({info.node_id for info in infos}) == 2  # a CPU each: two nodes
            handles = [
                await runtime.start(RayPipeline, RayJob(steps=3, side=side, pause=0.05))
                for _ in range(6)
            ]
            results = [await handle.result() for handle in handles]
            assert results == [expected(3)] * 6
            assert all(handle.status is RunStatus.COMPLETED for handle in handles)
            pids = {pid for _, pid in executions(side)}
            assert pids == {info.pid for info in infos}  # both hosts drove runs


async def test_live_runs_are_spread_evenly_over_hosts(tmp_path: Path, namespace: str) -> None:
    side = str(tmp_path / "side")
    # hosts that adopt nothing by themselves: where a run goes is the dispatch's choice
    idle = AdoptionPolicy(workflows=("nothing.Here",))
    cluster = RayCluster(hosts=2, namespace=namespace, imports=IMPORTS, adoption=idle)
    async with hosts_stopped(cluster):
        with anyio.fail_after(120):
            async with Runtime(store=tmp_path / "store", cluster=cluster) as runtime:
                # each run stays live (waiting for RayGo): a host's load counts it
                # from the moment it was handed the run, not once it has taken it
                handles = [
                    await runtime.start(RayGated, RayJob(steps=1, side=side)) for _ in range(8)
                ]

                async def all_under_way() -> bool:
                    return len(executions(side)) == 8

                await wait_until(all_under_way)
                per_host = collections.Counter(pid for _, pid in executions(side))
                assert sorted(per_host.values()) == [4, 4]
                assert await cluster.loads() == [4, 4]
                for handle in handles:
                    await runtime.signal(handle.run_id, RayGo())
                assert [await h.result() for h in handles] == [expected(2)] * 8


async def test_placed_agents_run_on_a_node_with_their_resources(
    tmp_path: Path, namespace: str, ray_cluster: LocalCluster
) -> None:
    side = str(tmp_path / "side")
    with anyio.fail_after(120):
        async with on_cluster(tmp_path / "store", namespace) as (runtime, cluster):
            job = RayJob(steps=4, side=side, placed=True)
            results = [await runtime.run(RayPipeline, job) for _ in range(2)]
            assert results == [expected(4)] * 2
            host_pids = {info.pid for info in cluster.host_info}
            pids = {pid for _, pid in executions(side)}
            assert len(pids) == 1  # one Ray actor for the class on the node
            assert not pids & host_pids


async def test_a_placed_handlers_milestone_is_in_the_log_before_it_goes_on(
    tmp_path: Path, namespace: str
) -> None:
    store, side = tmp_path / "store", str(tmp_path / "side")
    with anyio.fail_after(120):
        async with on_cluster(store, namespace, hosts=1) as (runtime, cluster):
            handle = await runtime.start(RayResuming, side)

            async def saved() -> bool:
                return any(key == "saved" for key, _ in executions(side))

            await wait_until(saved)
            # the handler still runs (it waits until its attempt ends), and its
            # milestone is in the run's log already: save_progress was durable
            log = await runtime.store.read_log(handle.run_id)
            milestones = [r for r in log if isinstance(r, MilestoneRecord)]
            assert [(m.agent, msgspec.msgpack.decode(m.data)) for m in milestones] == [("long", 5)]
            assert not handle.done
            await cluster.stop_hosts()  # the attempt ends: the run is interrupted
        async with on_cluster(store, namespace, hosts=1) as (runtime, _):
            # a new attempt, on a new host: the task starts from the recorded milestone
            assert await (await runtime.follow(handle.run_id)).result() == 5
    assert [key for key, _ in executions(side)] == ["start-0", "saved", "start-5"]


async def test_recover_on_a_cluster_driver_hands_runs_to_the_hosts(
    tmp_path: Path, namespace: str
) -> None:
    store, side = tmp_path / "store", str(tmp_path / "side")
    # hosts that adopt nothing by themselves: only what the driver hands them runs
    idle = AdoptionPolicy(workflows=("nothing.Here",))
    cluster = RayCluster(hosts=1, namespace=namespace, imports=IMPORTS, adoption=idle)
    async with hosts_stopped(cluster):
        with anyio.fail_after(120):
            async with Runtime(store=store, cluster=cluster) as runtime:
                handle = await runtime.start(RayGated, RayJob(steps=2, side=side))

                async def waiting() -> bool:
                    return len(executions(side)) == 2

                await wait_until(waiting)
            await cluster.stop_hosts()  # the run is left interrupted
            async with Runtime(store=store, cluster=cluster) as runtime:
                host_pid = cluster.host_info[0].pid
                assert (await runtime.store.read_run(handle.run_id)).status is (
                    RunStatus.INTERRUPTED
                )
                started: list[str] = []

                async def go_on() -> dict[str, object]:
                    return await runtime.recover(on_start=lambda h: started.append(h.run_id))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(go_on)

                    async def driven() -> bool:
                        return bool(started)

                    await wait_until(driven)
                    await runtime.signal(handle.run_id, RayGo())
                assert started == [handle.run_id]
                assert await (await runtime.follow(handle.run_id)).result() == expected(3)
            pids = [pid for _, pid in executions(side)]
            assert len(pids) == 3
            assert pids[2] == host_pid != os.getpid()  # on the host, not in the driver


async def test_send_nowait_to_a_placed_agent_keeps_order_and_shows_in_its_statistics(
    tmp_path: Path, namespace: str
) -> None:
    side = str(tmp_path / "side")
    with anyio.fail_after(120):
        async with on_cluster(tmp_path / "store", namespace, hosts=1) as (_, cluster):
            state = msgspec.msgpack.encode(RayCount())
            ref = await cluster.placer.spawn(RayPlacedWorker, run_id="r", name="w", state=state)
            assert isinstance(ref, PlacedRef)
            assert isinstance(ref, ActorRef)
            for n in range(5):
                ref.send_nowait(RayTask(n=n, side=side))
            # as this sender sees the agent's mailbox: five handed to Ray, none answered yet
            assert ref.mailbox_statistics().current_size == 5
            # the ask goes after the five sends: the agent handled them first
            reply = await ref.ask(RayTask(n=9, side=side))
            assert reply == RayResult(n=9, value=81 + 6)
            assert [key for key, _ in executions(side)] == [f"w:{n}" for n in (0, 1, 2, 3, 4, 9)]
            with pytest.raises(UnhandledMessageError):
                ref.send_nowait(RayGo())

            async def all_answered() -> bool:
                return ref.mailbox_statistics().current_size == 0

            await wait_until(all_answered)
            await cluster.placer.release("r")
            assert ref.mailbox_statistics().closed
            with pytest.raises(ActorStoppedError):
                ref.send_nowait(RayTask(n=0, side=side))


async def test_cancel_through_the_handle_reaches_the_host(tmp_path: Path, namespace: str) -> None:
    side = str(tmp_path / "side")
    with anyio.fail_after(120):
        async with on_cluster(tmp_path / "store", namespace, hosts=1) as (runtime, _):
            handle = await runtime.start(RayPipeline, RayJob(steps=100, side=side, pause=0.1))

            async def under_way() -> bool:
                return bool(executions(side))

            await wait_until(under_way)
            handle.cancel("enough")
            await handle.wait()
            assert handle.status is RunStatus.CANCELLED
            with pytest.raises(RunFailedError, match="enough"):
                await handle.result()
            assert len(executions(side)) < 100


async def test_hosts_of_another_setup_are_refused_or_replaced_and_their_runs_go_on(
    tmp_path: Path, namespace: str
) -> None:
    store, side = tmp_path / "store", str(tmp_path / "side")
    v1, v2 = RuntimeConfig(code_version="v1"), RuntimeConfig(code_version="v2")
    old = RayCluster(hosts=1, namespace=namespace, imports=IMPORTS)
    async with hosts_stopped(old):
        with anyio.fail_after(120):
            async with Runtime(store=store, config=v1, cluster=old) as runtime:
                handle = await runtime.start(RayGated, RayJob(steps=3, side=side, placed=True))

                async def waiting() -> bool:
                    return len(executions(side)) == 3

                await wait_until(waiting)
                old_host = old.host_info[0]
            # the host is detached: it drives the run (waiting for RayGo) without a driver
            refused = RayCluster(hosts=1, namespace=namespace, imports=IMPORTS)
            with pytest.raises(HostsOutdatedError, match=r"config\.code_version") as caught:
                async with Runtime(store=store, config=v2, cluster=refused):
                    pass
            assert caught.value.hosts == ["actorflow-host-0"]
            assert caught.value.differences == ["config.code_version"]
            # refusing touched nothing; a driver with the same setup reuses the host
            same = RayCluster(hosts=1, namespace=namespace, imports=IMPORTS)
            async with Runtime(store=store, config=v1, cluster=same) as runtime:
                assert same.host_info[0].pid == old_host.pid
                assert await runtime.store.is_owned(handle.run_id)
            replacing = RayCluster(
                hosts=1, namespace=namespace, imports=IMPORTS, replace_hosts=True
            )
            async with Runtime(store=store, config=v2, cluster=replacing) as runtime:
                new_host = replacing.host_info[0]
                assert new_host.pid != old_host.pid
                followed = await runtime.follow(handle.run_id)

                async def taken_over() -> bool:
                    manifest = await runtime.store.read_run(handle.run_id)
                    return manifest.owner == new_host.owner

                await wait_until(taken_over)
                await runtime.signal(handle.run_id, RayGo())
                # the placed agent's state went on from its third answer, on a new actor
                assert await followed.result() == expected(4)
            ran = executions(side)
            keys = [key for key, _ in ran]
            assert len(keys) == len(set(keys)) == 4  # the new host replayed, ran nothing again
            old_placed = {pid for _, pid in ran[:3]}
            assert len(old_placed) == 1
            assert ran[3][1] not in old_placed  # the placed actor ran the old code: replaced


async def test_a_host_an_earlier_driver_could_not_start_is_replaced(
    tmp_path: Path, namespace: str
) -> None:
    broken = unreachable_store(namespace)
    fixed = RayCluster(hosts=1, namespace=namespace, imports=IMPORTS)
    side = str(tmp_path / "side")
    async with hosts_stopped(fixed):
        with anyio.fail_after(120):
            with pytest.raises(HostStartError):
                async with Runtime(store=tmp_path / "store", cluster=broken):
                    pass
            # the failed host is still there, named; a fixed setup replaces it
            async with Runtime(store=tmp_path / "store", cluster=fixed) as runtime:
                assert fixed.host_info[0].error is None
                assert await runtime.run(RayPipeline, RayJob(steps=2, side=side)) == expected(2)


# --- bad input -------------------------------------------------------------------------

UNREACHABLE = """
import anyio
from actorflow import Runtime
from actorflow.errors import ClusterUnreachableError
from actorflow.ray import RayCluster

async def main():
    cluster = RayCluster("127.0.0.1:9", connect_timeout=5)
    try:
        async with Runtime(store={store!r}, cluster=cluster):
            pass
    except ClusterUnreachableError as exc:
        print("named:", exc)

anyio.run(main)
"""


def test_an_address_that_does_not_answer_is_a_named_error(tmp_path: Path) -> None:
    # a process of its own: this one is connected to the test cluster already
    code = UNREACHABLE.format(store=str(tmp_path / "store"))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.startswith("named: cannot connect to the Ray cluster at '127.0.0.1:9'")
    assert "RayCluster(address=...)" in out.stdout


async def test_a_store_the_hosts_cannot_reach_is_a_named_error(
    tmp_path: Path, namespace: str
) -> None:
    cluster = unreachable_store(namespace)
    async with hosts_stopped(cluster):
        with anyio.fail_after(60), pytest.raises(HostStartError, match="must reach the store"):
            async with Runtime(store=tmp_path / "store", cluster=cluster):
                pass


async def test_hosts_find_a_workflow_class_by_the_module_its_run_recorded(
    tmp_path: Path, namespace: str
) -> None:
    # RayUnshipped's module is in no `imports`: the host imports the one the run recorded
    cluster = RayCluster(hosts=1, namespace=namespace, imports=("tests.ray.app",))
    async with hosts_stopped(cluster):
        with anyio.fail_after(120):
            async with Runtime(store=tmp_path / "store", cluster=cluster) as runtime:
                assert await runtime.run(RayUnshipped, 21, run_id="unshipped") == 42


async def test_a_class_the_hosts_cannot_import_is_a_named_error_and_the_run_waits(
    tmp_path: Path, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a module only this driver can import: its folder is on no host's path
    code = tmp_path / "code"
    code.mkdir()
    name = f"driver_only_{uuid.uuid4().hex[:12]}"
    (code / f"{name}.py").write_text(DRIVER_ONLY.format(name=name))
    monkeypatch.syspath_prepend(str(code))
    workflow = importlib.import_module(name).DriverOnly
    cluster = RayCluster(hosts=1, namespace=namespace, imports=("tests.ray.app",))
    async with hosts_stopped(cluster):
        with anyio.fail_after(120):
            async with Runtime(store=tmp_path / "store", cluster=cluster) as runtime:
                with pytest.raises(ClassNotShippedError, match="working_dir"):
                    await runtime.start(workflow, 21, run_id="unshipped")
                assert (await runtime.store.read_run("unshipped")).status is RunStatus.QUEUED


DRIVER_ONLY = """
from actorflow import Orchestrator, RunContext


class DriverOnly(Orchestrator):
    __actorflow_name__ = "{name}.DriverOnly"

    async def run(self, ctx: RunContext, n: int) -> int:
        return 2 * n
"""


async def test_placed_agents_find_their_class_by_the_module_its_spawn_recorded(
    tmp_path: Path, namespace: str
) -> None:
    # tests.ray.lazy is in no `imports`, and only the run imports it on the host
    store, side = tmp_path / "store", str(tmp_path / "side")
    cluster = RayCluster(hosts=1, namespace=namespace, imports=IMPORTS)
    async with hosts_stopped(cluster):
        with anyio.fail_after(120):
            async with Runtime(store=store, cluster=cluster) as runtime:
                handle = await runtime.start(RayLazyPipeline, RayJob(steps=3, side=side))
                assert await handle.result() == expected(3)
                assert (await runtime.store.read_run(handle.run_id)).attempt == 0
