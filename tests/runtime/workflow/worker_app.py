"""The app of the worker-process tests (``actorflow worker --app <this module>:runtime``).

Every execution of a ``Tick`` is written to the side file named by
``ACTORFLOW_TEST_SIDE`` (run id, step id and process id, fsynced) before
its work; every tick after a run's first waits until the file named by
``ACTORFLOW_TEST_GATE`` exists, so the test decides when runs may finish.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

import anyio

from actorflow import (
    Durability,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
)
from actorflow.storage import open_store

if TYPE_CHECKING:
    from anyio.abc import Process

STEPS = 3


class Tick(Request[int], frozen=True):
    n: int


class WorkerTicker(Specialist):
    __actorflow_name__ = "tests.worker_app.WorkerTicker"

    @handler
    async def tick(self, msg: Tick) -> int:
        step = self.step
        assert step is not None, "ticks run as steps of a run"
        fd = os.open(os.environ["ACTORFLOW_TEST_SIDE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{step.run_id} {step.step_id} {os.getpid()}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        gate = anyio.Path(os.environ["ACTORFLOW_TEST_GATE"])
        # the test, another process, opens the gate: nothing to wait on but the file
        while msg.n > 0 and not await gate.exists():  # noqa: ASYNC110
            await anyio.sleep(0.01)
        return msg.n * 10


class WorkerChain(Orchestrator):
    __actorflow_name__ = "tests.worker_app.WorkerChain"

    async def run(self, ctx: RunContext, seed: int) -> list[int]:
        ticker = await ctx.spawn(WorkerTicker, name="ticker")
        return [seed + await ctx.ask(ticker, Tick(i)) for i in range(STEPS)]


def expected(seed: int) -> list[int]:
    """What an uninterrupted run of ``seed`` returns."""
    return [seed + i * 10 for i in range(STEPS)]


LEASE_TTL = 2.0
"""The S3 lease of these workers: short, so a killed one's runs are free soon."""


def runtime(store: str) -> Runtime:
    """Every step durable before the next: the test reads the log right after a kill."""
    options = {"lease_ttl": LEASE_TTL} if store.startswith("s3://") else {}
    return Runtime(
        store=open_store(store, **options), config=RuntimeConfig(durability=Durability.SYNC)
    )


def worker_command(store: str, *, poll: float, concurrency: int | None = None) -> list[str]:
    """The command line of a worker process on ``store`` running this app."""
    command = [sys.executable, "-m", "actorflow", "worker", "--app", f"{__name__}:runtime"]
    command += ["--store", store, "--poll", str(poll)]
    if concurrency is not None:
        command += ["--concurrency", str(concurrency)]
    return command


async def stop_workers(*workers: Process) -> None:
    """SIGTERM, then SIGKILL after a grace: no worker outlives the test that started it."""
    with anyio.CancelScope(shield=True):
        for w in workers:
            if w.returncode is None:
                w.send_signal(signal.SIGTERM)
        with anyio.move_on_after(30):
            for w in workers:
                await w.wait()
        for w in workers:
            if w.returncode is None:
                w.kill()
                await w.wait()
