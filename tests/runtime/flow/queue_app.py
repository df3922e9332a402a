"""The app of the queue worker-process tests (``actorflow worker --app <this module>:runtime``).

Each run of ``Logged`` writes ``enter`` and ``exit`` lines (run id,
priority, process id) to the side file named by ``ACTORFLOW_TEST_SIDE``,
appended and fsynced, so the file's order is the order the runs did them in.
"""

from __future__ import annotations

import os

import anyio

from actorflow import Durability, Orchestrator, Queue, RunContext, Runtime, RuntimeConfig
from actorflow.storage import open_store

CAP = 2
QUEUES = [Queue("reports", max_concurrent=CAP)]
LEASE_TTL = 2.0
"""The S3 lease of these workers: short, so a killed one's slots are free soon."""


def _note(what: str, run_id: str, priority: int) -> None:
    fd = os.open(os.environ["ACTORFLOW_TEST_SIDE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{what} {run_id} {priority} {os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class Logged(Orchestrator):
    __actorflow_name__ = "tests.queue_app.Logged"

    async def run(self, ctx: RunContext, priority: int) -> int:
        _note("enter", ctx.run_id, priority)
        await anyio.sleep(0.005)  # a run beside it, if the cap allows one, enters meanwhile
        _note("exit", ctx.run_id, priority)
        return priority


def runtime(store: str) -> Runtime:
    """A runtime on ``store`` that declares the test's queue."""
    options = {"lease_ttl": LEASE_TTL} if store.startswith("s3://") else {}
    return Runtime(
        store=open_store(store, **options),
        config=RuntimeConfig(durability=Durability.SYNC),
        queues=QUEUES,
    )
