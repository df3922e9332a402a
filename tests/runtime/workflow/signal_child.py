"""The child program of the signal SIGKILL test.

Run as ``python -m tests.runtime.workflow.signal_child <store_dir> <run_id> <backend>``:
starts ``TwoFixes`` (two ``ctx.wait_for(Fix)`` in a row) on a FileStore and
prints ``WAITING`` once the run waits, then ``TOOK <n>`` after each signal it
takes, and ``RESULT <list>`` at the end (the parent kills it before that).
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.storage import EventRecord, FileStore

CHILD_TIMEOUT = 60.0


class Fix(msgspec.Struct, frozen=True):
    n: int


class TwoFixes(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> list[int]:
        got: list[int] = []
        for _round in range(2):
            fix = await ctx.wait_for(Fix)
            got.append(fix.n)
            print(f"TOOK {fix.n}", flush=True)
        return got


async def until_waiting(runtime: Runtime, run_id: str) -> None:
    """Until the run's first wait has started (its request is in the log)."""
    while True:
        log = await runtime.store.read_log(run_id)
        if any(isinstance(r, EventRecord) and r.kind == "wait_requested" for r in log):
            return
        await anyio.sleep(0.005)


async def main(store_dir: str, run_id: str) -> None:
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(store=FileStore(store_dir)) as runtime:
            handle = await runtime.start(TwoFixes, None, run_id=run_id)
            await until_waiting(runtime, run_id)
            print("WAITING", flush=True)
            print(f"RESULT {await handle.result()}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], backend=sys.argv[3])
