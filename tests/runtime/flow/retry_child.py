"""The child program of the retry SIGKILL test.

Run as ``python -m tests.runtime.flow.retry_child <store_dir> <backend> <mode>``,
mode ``start`` or ``recover``. The run asks ``Flaky`` once; its handler fails
its first ``FAILS`` attempts and appends each attempt (``<pid> <attempt>``,
fsync'd) to ``<store_dir>.attempts``. In ``start`` mode the clock SIGKILLs the
process as the backoff after attempt ``KILL_AT`` begins: that attempt's
failure is recorded by then. ``recover`` prints ``RESULT <json>``.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
import msgspec

from actorflow import (
    Orchestrator,
    Request,
    RetryPolicy,
    RunContext,
    Runtime,
    Specialist,
    handler,
)
from actorflow.runtime import SystemClock, current_step
from actorflow.storage import FileStore

FAILS = 3
KILL_AT = 2
CHILD_TIMEOUT = 60.0


class Call(Request[int], frozen=True):
    pass


class Flaky(Specialist):
    retry = RetryPolicy(max_attempts=6, initial_backoff=0.01, max_backoff=0.05)

    @handler
    async def call(self, call: Call) -> int:
        step = current_step()
        assert step is not None
        fd = os.open(sys.argv[1] + ".attempts", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{os.getpid()} {step.attempt}\n".encode())
        os.fsync(fd)
        os.close(fd)
        if step.attempt <= FAILS:
            raise ConnectionError(f"attempt {step.attempt} failed")
        return step.attempt


class CallOnce(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> int:
        flaky = await ctx.spawn(Flaky, name="flaky")
        return await ctx.ask(flaky, Call())


class KillingClock(SystemClock):
    """Dies as the backoff after attempt ``KILL_AT`` begins."""

    def __init__(self) -> None:
        self.sleeps = 0

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.sleeps == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        await super().sleep(seconds)


async def main(store_dir: str, mode: str) -> None:
    store = FileStore(store_dir)
    with anyio.fail_after(CHILD_TIMEOUT):
        clock = KillingClock() if mode == "start" else SystemClock()
        async with Runtime(store=store, clock=clock) as runtime:
            if mode == "start":
                await runtime.run(CallOnce, None, run_id="flaky")
                return
            results = await runtime.recover()
    await store.aclose()
    sys.stdout.write("RESULT " + msgspec.json.encode(results).decode() + "\n")


if __name__ == "__main__":
    _, folder, backend, how = sys.argv
    anyio.run(main, folder, how, backend=backend)
