"""The app of the schedule worker-process test (``actorflow worker --app <this module>:runtime``).

Its clock reads the time from the file named by ``ACTORFLOW_TEST_CLOCK``,
which the test moves; each run of ``Stamped`` writes its run id and process
id to the side file named by ``ACTORFLOW_TEST_SIDE`` (fsynced).
"""

from __future__ import annotations

import os

import anyio

from actorflow import Durability, Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.storage import open_store


class FileClock:
    """A clock whose time is what the test last wrote to a file."""

    def __init__(self, path: str) -> None:
        self._path = path

    def now(self) -> float:
        with open(self._path) as f:
            return float(f.read())

    async def sleep(self, seconds: float) -> None:
        """Real time: nothing in these workers backs off or waits for a limit."""
        await anyio.sleep(max(seconds, 0.0))


def set_time(path: str, now: float) -> None:
    """Move the workers' clock (atomically: a reader never sees half a number)."""
    temp = f"{path}.tmp"
    with open(temp, "w") as f:
        f.write(repr(now))
    os.replace(temp, path)


class Stamped(Orchestrator):
    __actorflow_name__ = "tests.schedule_app.Stamped"

    async def run(self, ctx: RunContext, n: int) -> int:
        fd = os.open(os.environ["ACTORFLOW_TEST_SIDE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{ctx.run_id} {os.getpid()}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return n


LEASE_TTL = 2.0
"""The S3 lease of these workers: short, so a killed one's runs are free soon."""


def runtime(store: str) -> Runtime:
    """A runtime on ``store`` whose schedules read the test's clock."""
    options = {"lease_ttl": LEASE_TTL} if store.startswith("s3://") else {}
    return Runtime(
        store=open_store(store, **options),
        config=RuntimeConfig(durability=Durability.SYNC),
        clock=FileClock(os.environ["ACTORFLOW_TEST_CLOCK"]),
    )
