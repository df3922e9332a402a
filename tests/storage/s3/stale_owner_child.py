"""A run's owner that the fencing tests stop (SIGSTOP) past its lease and resume.

Run as ``python -m tests.storage.s3.stale_owner_child <asyncio|trio> <url>
<bucket> <access key> <secret key> <prefix> <mode>``. It starts run ``RUN``
of ``Flow`` on an ``S3Store`` under ``prefix``. With the environment variable
``CONTROL_ENV`` set (in this process only), the worker says ``reached <n>`` on
stdout as it takes task ``n``, and before it answers task 1 it waits for a
line on stdin. When the run ends, one line on stdout says how:
``result <value>`` or ``error <type>``.

``mode``:
- ``paused``: a 2-second lease with its heartbeat, as a real owner has.
- ``lagging-clock``: the store's clock lags two hours behind and its lease
  lasts one (its heartbeat would come in 20 minutes): it believes its lease
  good while every other process sees it expired, so only the log can stop it.

The test process imports this module for the same workflow (the classes are
found by name) and recovers the run itself, without gates.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from types import SimpleNamespace

import anyio
import anyio.to_thread
import structlog

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.errors import LeaseLostError
from actorflow.storage import S3Store

RUN = "stale-owner"
STEPS = 3
CONTROL_ENV = "ACTORFLOW_TEST_CONTROLLED"
LAG = 7200.0


def expected() -> int:
    """The run's result."""
    return sum(10 * n + 1 for n in range(STEPS))


class Work(Request[int], frozen=True):
    n: int


class Worker(Specialist):
    __actorflow_name__ = "tests.s3_stale_owner.Worker"

    @handler
    async def work(self, task: Work) -> int:
        if os.environ.get(CONTROL_ENV):
            print(f"reached {task.n}", flush=True)
            if task.n == 1:
                await anyio.to_thread.run_sync(sys.stdin.readline)  # the test's word to go on
        return 10 * task.n + 1


class Flow(Orchestrator):
    __actorflow_name__ = "tests.s3_stale_owner.Flow"

    async def run(self, ctx: RunContext, steps: int) -> int:
        worker = await ctx.spawn(Worker, name="worker")
        total = 0
        for n in range(steps):
            total += await ctx.ask(worker, Work(n))
        return total


def _lag_the_lease_clock() -> None:
    import actorflow.storage.s3._lease as lease_module
    import actorflow.storage.s3._workers as workers_module

    lagging = SimpleNamespace(time=lambda: time.time() - LAG)
    lease_module.time = lagging  # type: ignore[assignment,attr-defined]
    workers_module.time = lagging  # type: ignore[assignment,attr-defined]


def _named(exc: BaseException) -> str:
    """``LeaseLostError`` if it is among the errors (or their causes), else the first's type."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop(0)
        seen.append(e)
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        if e.__cause__ is not None:
            todo.append(e.__cause__)
    if any(isinstance(e, LeaseLostError) for e in seen):
        return "LeaseLostError"
    return type(exc).__name__


async def main(url: str, bucket: str, key: str, secret: str, prefix: str, mode: str) -> None:
    # stdout is for the test: log lines go to stderr
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    if mode == "lagging-clock":
        _lag_the_lease_clock()
    store = S3Store(
        bucket,
        prefix=prefix,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        lease_ttl=3600.0 if mode == "lagging-clock" else 2.0,
    )
    outcome = "no outcome"
    try:
        async with store, Runtime(store=store) as runtime:
            handle = await runtime.start(Flow, STEPS, run_id=RUN)
            outcome = f"result {await handle.result()}"
    except (Exception, BaseExceptionGroup) as exc:
        traceback.print_exception(exc, file=sys.stderr)  # for the test's failure message
        outcome = f"error {_named(exc)}"
    print(outcome, flush=True)


if __name__ == "__main__":
    backend, url, bucket, key, secret, prefix, mode = sys.argv[1:]
    anyio.run(main, url, bucket, key, secret, prefix, mode, backend=backend)
