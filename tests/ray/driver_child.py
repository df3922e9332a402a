"""A driver process for the SIGKILL test: starts runs on the cluster, prints their ids, waits.

python -m tests.ray.driver_child ADDRESS NAMESPACE STORE SIDE RUNS BACKEND
"""

from __future__ import annotations

import sys

import anyio

from actorflow import Runtime
from actorflow.ray import RayCluster
from tests.ray.app import RayJob, RayPipeline


async def main(address: str, namespace: str, store: str, side: str, runs: int) -> None:
    cluster = RayCluster(address, namespace=namespace, imports=("tests.ray.app",), store=store)
    async with Runtime(store=store, cluster=cluster) as runtime:
        job = RayJob(steps=8, side=side, pause=0.25)
        for _ in range(runs):
            handle = await runtime.start(RayPipeline, job)
            print(handle.run_id, flush=True)
        print("started", flush=True)
        await anyio.sleep_forever()  # until killed


if __name__ == "__main__":
    address, namespace, store, side, runs, backend = sys.argv[1:]
    anyio.run(main, address, namespace, store, side, int(runs), backend=backend)
