"""Bad input names its error and loses no run."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import RunStatus, Runtime
from actorflow.errors import ClassNotShippedError, HostStartError
from actorflow.ray import RayCluster
from tests.ray.conftest import ROOT
from tests.ray.unshipped import RayUnshipped

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.usefixtures("ray_cluster")

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
    cluster = RayCluster(
        hosts=1,
        namespace=namespace,
        store="s3://nowhere/runs",
        store_options={"endpoint_url": "http://127.0.0.1:9", "max_attempts": 1},
    )
    try:
        with anyio.fail_after(60), pytest.raises(HostStartError, match="must reach the store"):
            async with Runtime(store=tmp_path / "store", cluster=cluster):
                pass
    finally:
        with anyio.CancelScope(shield=True):
            await cluster.stop_hosts()


async def test_a_class_the_hosts_cannot_import_is_a_named_error_and_the_run_waits(
    tmp_path: Path, namespace: str
) -> None:
    store = tmp_path / "store"
    cluster = RayCluster(hosts=1, namespace=namespace, imports=("tests.ray.app",))
    try:
        with anyio.fail_after(120):
            async with Runtime(store=store, cluster=cluster) as runtime:
                with pytest.raises(ClassNotShippedError, match="working_dir"):
                    await runtime.start(RayUnshipped, 21, run_id="unshipped")
                assert (await runtime.store.read_run("unshipped")).status is RunStatus.QUEUED
            await cluster.stop_hosts()
            # hosts that have the code take the run that waited
            shipped = RayCluster(
                hosts=1, namespace=namespace, imports=("tests.ray.app", "tests.ray.unshipped")
            )
            async with Runtime(store=store, cluster=shipped) as runtime:
                handle = await runtime.follow("unshipped")
                assert await handle.result() == 42
    finally:
        with anyio.CancelScope(shield=True):
            await cluster.stop_hosts()
