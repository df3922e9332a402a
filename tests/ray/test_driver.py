"""The driver dies (SIGKILL): its runs go on on the hosts, and a new driver attaches to them."""

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
from tests.ray.app import executions, expected, wait_until
from tests.ray.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.ray.conftest import LocalCluster

pytestmark = pytest.mark.usefixtures("ray_cluster")


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
