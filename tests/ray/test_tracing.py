"""A run on a Ray host asking an agent placed in another Ray process: one trace across them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import Runtime
from actorflow.ray import RayCluster
from actorflow.storage import open_store
from tests.ray.app import RayJob, RayPipeline, expected

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("opentelemetry.sdk")

from tests.ray.tracing_hook import read_spans

pytestmark = pytest.mark.usefixtures("ray_cluster")


async def test_a_placed_handlers_span_is_a_child_of_its_step_on_the_host(
    tmp_path: Path, namespace: str
) -> None:
    folder = tmp_path / "spans"
    folder.mkdir()
    cluster = RayCluster(
        hosts=1,
        namespace=namespace,
        imports=("tests.ray.app", "tests.ray.tracing_hook"),
        store=str(tmp_path / "store"),
        runtime_env={"env_vars": {"ACTORFLOW_TEST_SPANS": str(folder)}},
    )
    store = open_store(str(tmp_path / "store"))
    job = RayJob(steps=2, side=str(tmp_path / "side"), placed=True)
    with anyio.fail_after(180):
        try:
            async with Runtime(store=store, cluster=cluster) as runtime:
                assert await runtime.run(RayPipeline, job) == expected(2)
        finally:
            with anyio.CancelScope(shield=True):
                await cluster.stop_hosts()
                await store.aclose()
    spans = read_spans(str(folder))
    [run] = [s for s in spans if s["name"] == "actorflow.run"]
    asks = {s["span_id"]: s for s in spans if s["name"] == "actorflow.step.ask"}
    handlers = [s for s in spans if s["name"] == "actorflow.handler"]
    assert len(asks) == 2
    assert len(handlers) == 2
    for h in handlers:
        ask = asks[h["parent"]]
        assert h["trace_id"] == ask["trace_id"] == run["trace_id"]
        assert h["pid"] != ask["pid"], "the placed agent runs in a Ray process of its own"
        assert h["attributes"]["actorflow.step.id"] == ask["attributes"]["actorflow.step.id"]
