"""Hosts drive runs on a real local Ray cluster, from asyncio and from trio."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import RunStatus, Runtime
from actorflow.ray import RayCluster
from tests.ray.app import RayJob, RayPipeline, executions, expected
from tests.ray.conftest import SharedStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from actorflow.ray import HostInfo
    from tests.ray.conftest import LocalCluster

pytestmark = pytest.mark.usefixtures("ray_cluster")

IMPORTS = ("tests.ray.app",)


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
        store=shared.location,
        store_options=shared.options,
    )
    driver_store = shared.open()
    try:
        async with Runtime(store=driver_store, cluster=cluster) as runtime:
            yield runtime, cluster
    finally:
        with anyio.CancelScope(shield=True):
            await cluster.stop_hosts()
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
