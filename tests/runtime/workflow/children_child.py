"""The child program of the child-run SIGKILL test, and the workflows it runs.

Run as ``python -m tests.runtime.workflow.children_child <store_dir> <work_log> <backend>``:
starts ``Lead`` (run ``lead``), whose child run ``Check`` asks a worker to do
its work (appending a line to ``work_log``) and then waits for a ``Go``
signal. Prints ``WAITING`` once the child waits, after its work is recorded;
the parent test kills it (SIGKILL) there.
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
)
from actorflow.storage import EventRecord, FileStore, StepRecord

CHILD_TIMEOUT = 60.0
LEAD = "lead"
CHECK = "lead.child-0"
"""The id the child run gets: the parent's id and its start step's."""


class Go(msgspec.Struct, frozen=True):
    n: int


class Job(msgspec.Struct, frozen=True):
    n: int
    log: str = ""


class Work(Request[int], frozen=True):
    n: int
    log: str


class Worker(Specialist):
    __actorflow_name__ = "tests.children.Worker"

    @handler
    async def work(self, job: Work) -> int:
        async with await anyio.Path(job.log).open("a") as f:
            await f.write(f"{job.n}\n")
        return job.n * 10


class Check(Orchestrator):
    """Work once (recorded), then wait for a ``Go``: the result is work + go."""

    __actorflow_name__ = "tests.children.Check"

    async def run(self, ctx: RunContext, job: Job) -> int:
        worker = await ctx.spawn(Worker, name="worker")
        value = await ctx.ask(worker, Work(job.n, job.log))
        go = await ctx.wait_for(Go)
        return value + go.n


class Lead(Orchestrator):
    __actorflow_name__ = "tests.children.Lead"

    async def run(self, ctx: RunContext, job: Job) -> str:
        value = await ctx.run_child(Check, job)
        return f"lead:{value}"


async def until_logged(runtime: Runtime, run_id: str, kind: str) -> None:
    """Until the run's log holds a record (step or event) of ``kind``."""
    while True:
        try:
            log = await runtime.store.read_log(run_id)
        except LookupError:
            log = []
        if any(isinstance(r, StepRecord | EventRecord) and r.kind == kind for r in log):
            return
        await anyio.sleep(0.005)


async def main(store_dir: str, work_log: str) -> None:
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(
            store=FileStore(store_dir), config=RuntimeConfig(signal_poll_interval=0.01)
        ) as runtime:
            handle = await runtime.start(Lead, Job(1, work_log), run_id=LEAD)
            await until_logged(runtime, CHECK, "wait_requested")
            await until_logged(runtime, CHECK, "ask")
            print("WAITING", flush=True)
            print(f"RESULT {await handle.result()}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], backend=sys.argv[3])
