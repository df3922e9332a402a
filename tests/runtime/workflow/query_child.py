"""The workflow the query tests look at, and the child program that owns it in one of them.

Run as ``python -m tests.runtime.workflow.query_child <store_dir> <run_id> <backend>``:
starts ``Watched`` on a FileStore and prints ``WAITING`` once the run waits
in ``ctx.wait_for(Fix)``; it waits there until the parent kills it.
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.storage import EventRecord, FileStore, Store

CHILD_TIMEOUT = 60.0
WAIT_SECONDS = 3600.0
BIG_NOTE = "n" * 6000  # over the inline limit: the state is kept as a blob


class Fix(msgspec.Struct, frozen=True):
    n: int


class Note(Request[int], frozen=True):
    text: str


class Tally(msgspec.Struct):
    count: int = 0
    notes: list[str] = msgspec.field(default_factory=list)


class Clerk(Specialist):
    __actorflow_name__ = "tests.query.Clerk"
    state: Tally

    @handler
    async def note(self, note: Note) -> int:
        self.state.count += 1
        self.state.notes.append(note.text)
        return self.state.count


class Watched(Orchestrator):
    """Two agents (one state inline, one in a blob), a phase, a decision, then a wait."""

    __actorflow_name__ = "tests.query.Watched"

    @phase
    async def prepare(self, ctx: RunContext) -> int:
        small = await ctx.spawn(Clerk, name="small")
        big = await ctx.spawn(Clerk, name="big")
        await ctx.ask(small, Note("a"))
        await ctx.ask(small, Note("b"))
        return await ctx.ask(big, Note(BIG_NOTE))

    async def run(self, ctx: RunContext, _: None) -> int:
        await self.prepare(ctx)
        await ctx.decide("wait", rationale="a fix is needed", confidence=0.5)
        fix = await ctx.wait_for(Fix, timeout=WAIT_SECONDS)
        return fix.n


async def until_waiting(store: Store, run_id: str) -> None:
    """Until the run's wait has started (its request is in the log)."""
    while True:
        log = await store.read_log(run_id)
        if any(isinstance(r, EventRecord) and r.kind == "wait_requested" for r in log):
            return
        await anyio.sleep(0.005)


async def main(store_dir: str, run_id: str) -> None:
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(store=FileStore(store_dir)) as runtime:
            handle = await runtime.start(Watched, None, run_id=run_id)
            await until_waiting(runtime.store, run_id)
            print("WAITING", flush=True)
            print(f"RESULT {await handle.result()}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], backend=sys.argv[3])
