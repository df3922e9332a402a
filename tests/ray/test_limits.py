"""A ``Limit`` on a Ray cluster is one budget per key for every host and worker process:
its ``per_minute`` and ``max_concurrent`` hold across processes (audited), a dead holder's
slot comes free, and runs on two hosts share one budget."""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
import ray
import sniffio

from actorflow import Limit, Runtime
from actorflow.ray import RayCluster, RayLimits
from actorflow.runtime.flow import Limiter, SystemClock
from actorflow.storage import LIMIT_WINDOW
from tests.ray.app import RayJob, RayLimitedPipeline, note, wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.usefixtures("ray_cluster")

IMPORTS = ("tests.ray.app",)
PER_MINUTE = 10
ROUNDS = 40
ROUND_SECONDS = 6.0  # fake seconds between rounds: ten rounds in a window
TRIES = 4  # per process and round: three processes ask 12 times a round for 10 a minute


@ray.remote(num_cpus=0)
def _take_at(namespace: str, backend: str, now: float, tries: int) -> tuple[int, int]:
    """In a Ray worker process: ``tries`` requests of the ``fake`` budget at fake time ``now``."""

    async def take() -> int:
        limits = RayLimits(namespace)
        granted = 0
        for _ in range(tries):
            wait = await limits.take_limit(
                "fake", per_minute=PER_MINUTE, tokens_per_minute=None, now=now
            )
            granted += wait <= 0
        return granted

    return anyio.run(take, backend=backend), os.getpid()


@ray.remote(num_cpus=0)
def _hold_slots(namespace: str, backend: str, side: str, times: int) -> int:
    """In a Ray worker process: ``times`` handlers' worth of a 2-slot limit, noted in ``side``."""

    async def hold() -> None:
        limiter = Limiter(Limit("slots", max_concurrent=2), SystemClock(), RayLimits(namespace))
        for _ in range(times):
            permit = await limiter.acquire()
            note(side, "+")
            await anyio.sleep(0.005)  # the handler's work: others try meanwhile
            note(side, "-")
            permit.release()

    anyio.run(hold, backend=backend)
    return os.getpid()


class SlotHolder:
    """A Ray actor that takes a slot and is then killed while it holds it."""

    def __init__(self, namespace: str) -> None:
        handle = ray.get_runtime_context().current_actor
        self._limits = RayLimits(namespace, holder=handle)

    async def take(self, key: str) -> bool:
        return await self._limits.take_limit_slot(key, 1) is not None

    async def holds_limit_token(self, token: str) -> bool:
        return token == self._limits.token


def running_at_most(side: str) -> tuple[int, set[int]]:
    """The most handlers the side file shows running at once, and the processes that ran them."""
    most = running = 0
    pids: set[int] = set()
    with open(side) as f:
        for line in f.read().splitlines():
            sign, pid = line.split()
            pids.add(int(pid))
            running += 1 if sign == "+" else -1
            most = max(most, running)
    return most, pids


@contextlib.asynccontextmanager
async def budgets_stopped(namespace: str) -> AsyncIterator[None]:
    """Kill the namespace's budget actors at the end (a cluster's ``stop_hosts`` does it too)."""
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await RayCluster(namespace=namespace).stop_hosts()


async def test_per_minute_holds_across_worker_processes_by_a_fake_clock(namespace: str) -> None:
    backend = sniffio.current_async_library()
    granted_at: list[float] = []
    pids: set[int] = set()
    with anyio.fail_after(180):
        async with budgets_stopped(namespace):
            for r in range(ROUNDS):  # the processes' fake clocks move together, round by round
                now = 1_800_000_000.0 + r * ROUND_SECONDS
                refs = [_take_at.remote(namespace, backend, now, TRIES) for _ in range(3)]
                for got, pid in await anyio.to_thread.run_sync(
                    ray.get, refs, abandon_on_cancel=True
                ):
                    granted_at.extend([now] * got)
                    pids.add(pid)
    assert len(pids) >= 2  # several worker processes shared the budget
    for t in granted_at:  # no window of a minute holds more than the budget
        assert sum(1 for u in granted_at if t - LIMIT_WINDOW < u <= t) <= PER_MINUTE
    # and the budget is spent, not starved: each round grants what the window frees
    assert len(granted_at) >= PER_MINUTE * (ROUNDS * ROUND_SECONDS / LIMIT_WINDOW) - PER_MINUTE


async def test_max_concurrent_holds_across_worker_processes(namespace: str, tmp_path: Path) -> None:
    backend = sniffio.current_async_library()
    side = str(tmp_path / "side")
    with anyio.fail_after(180):
        async with budgets_stopped(namespace):
            refs = [_hold_slots.remote(namespace, backend, side, 15) for _ in range(3)]
            pids = set(await anyio.to_thread.run_sync(ray.get, refs, abandon_on_cancel=True))
    most, noted = running_at_most(side)
    assert len(pids) >= 2
    assert noted == pids
    assert most <= 2


async def test_a_dead_holders_slot_comes_free(namespace: str) -> None:
    holder: Any = ray.remote(SlotHolder).options(num_cpus=0).remote(namespace)
    limits = RayLimits(namespace)
    with anyio.fail_after(120):
        async with budgets_stopped(namespace):
            assert await anyio.to_thread.run_sync(ray.get, holder.take.remote("one"))
            assert await limits.take_limit_slot("one", 1) is None  # the holder lives: held
            await anyio.to_thread.run_sync(ray.kill, holder)

            async def freed() -> bool:
                slot = await limits.take_limit_slot("one", 1)
                if slot is None:
                    return False
                limits.release_limit_slot(slot)
                return True

            await wait_until(freed)


async def test_runs_on_two_hosts_share_one_budget(tmp_path: Path, namespace: str) -> None:
    side = str(tmp_path / "side")
    limit = Limit("ray-shared", max_concurrent=1, per_minute=6)
    cluster = RayCluster(hosts=2, namespace=namespace, imports=IMPORTS, store=str(tmp_path / "s"))
    with anyio.fail_after(180):
        try:
            async with Runtime(store=tmp_path / "s", cluster=cluster, limits=[limit]) as runtime:
                handles = [
                    await runtime.start(RayLimitedPipeline, RayJob(steps=3, side=side, pause=0.1))
                    for _ in range(2)
                ]
                assert [await h.result() for h in handles] == [3, 3]
                # six asks on two hosts spent the whole minute's budget of the cluster
                wait = await RayLimits(namespace).take_limit(
                    "ray-shared", per_minute=6, tokens_per_minute=None, now=time.time()
                )
                assert wait > 0
        finally:
            with anyio.CancelScope(shield=True):
                await cluster.stop_hosts()
    most, pids = running_at_most(side)
    assert most == 1
    assert len(pids) == 2  # both hosts ran the limited handler
