"""A two-phase workflow for tests of recovery from damaged logs and of blocked runs.

``Ledger`` asks one agent for ``n`` entries in phase ``first``, then ``n`` more in
phase ``second``; every entry the agent writes is appended to ``WRITTEN``. A test
can make the agent wait at one entry (``hold``) so that its runtime stops with
the first phase's checkpoint stored and some of the second phase's steps
recorded after it. ``define_ledger(2)`` redefines the workflow as a deploy would,
with a step inserted where version 1 recorded another: replaying a version 1
run diverges (``NonDeterminismError``). The CLI loads it with
``--app tests.runtime.workflow.ledger_flow:make_runtime``; ``damaged_log`` leaves
an interrupted run on a file store with a flipped byte in one log record,
``blocked_run`` a run blocked by version 2.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow import (
    CheckpointTriggers,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.storage import FileStore, RunStatus
from actorflow.storage.file._frames import HEADER_SIZE, scan

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store

ENTRIES = 4
"""Entries per phase."""
RESULT = [ENTRIES, 2 * ENTRIES]
"""What a run returns: the agent's count after each phase."""
CONFIG = RuntimeConfig(triggers=CheckpointTriggers(every_seconds=None))
"""Checkpoints at phase starts and ends only, whatever the machine's speed."""

WRITTEN: list[str] = []
"""Every entry the agent wrote, in order, in this process."""


@dataclass
class Hold:
    """The agent waits at entry ``at`` until ``release`` is set; ``reached`` says it got there."""

    at: str
    reached: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)


HOLD: list[Hold] = []


class Entry(Request[int], frozen=True):
    name: str


class Count(msgspec.Struct):
    entries: int = 0


class Clerk(Specialist):
    __actorflow_name__ = "tests.ledger_flow.Clerk"
    state: Count

    @handler
    async def write(self, entry: Entry) -> int:
        WRITTEN.append(entry.name)
        for hold in HOLD:
            if hold.at == entry.name:
                hold.reached.set()
                await hold.release.wait()
        self.state.entries += 1
        return self.state.entries


def define_ledger(version: int) -> type[Orchestrator]:
    """The workflow as deployed at ``version`` (registered under one name, replacing the last)."""

    class Ledger(Orchestrator):
        __actorflow_name__ = "tests.ledger_flow.Ledger"

        @phase
        async def first(self, ctx: RunContext, n: int) -> int:
            clerk = await ctx.spawn(Clerk, name="clerk")
            count = 0
            for i in range(n):
                count = await ctx.ask(clerk, Entry(f"first-{i}"))
            return count

        @phase
        async def second(self, ctx: RunContext, n: int) -> int:
            clerk = await ctx.spawn(Clerk, name="clerk")
            if version == 2:  # an incompatible change: where version 1 asked for second-0
                await ctx.ask(clerk, Entry("second-new"))
            count = 0
            for i in range(n):
                count = await ctx.ask(clerk, Entry(f"second-{i}"))
            return count

        async def run(self, ctx: RunContext, n: int) -> list[int]:
            return [await self.first(ctx, n), await self.second(ctx, n)]

    return Ledger


Ledger = define_ledger(1)


def make_runtime(store: str) -> Runtime:
    """The runtime the CLI loads with ``--app``."""
    return Runtime(store=store, config=CONFIG)


async def interrupted_run(store: Store, run_id: str, *, at: str = "second-2") -> None:
    """Start a run and stop its runtime while the agent writes entry ``at``.

    The first phase's checkpoint is stored by then, and the second phase's
    entries before ``at`` are recorded after it; the run is left interrupted.
    """
    hold = Hold(at)
    HOLD.append(hold)
    try:
        # the held entry never finishes: its agent is not waited for
        async with Runtime(store=store, config=CONFIG, shutdown_timeout=0) as runtime:
            handle = await runtime.start(define_ledger(1), ENTRIES, run_id=run_id)
            async with contextlib.aclosing(handle.events(emits=False)) as events:
                async for event in events:
                    if event.name == "checkpoint_saved" and event["trigger"] == "phase_end":
                        break
            await hold.reached.wait()
    finally:
        HOLD.remove(hold)
    assert (await store.read_run(run_id)).status is RunStatus.INTERRUPTED


async def blocked_run(store: Store, run_id: str, *, code_version: str) -> BaseException:
    """Interrupt a run with version 1, then recover it with version 2 under ``code_version``.

    Returns what its handle raised (the run is blocked); ``WRITTEN`` holds what
    the recovery ran.
    """
    await interrupted_run(store, run_id)
    define_ledger(2)
    WRITTEN.clear()
    config = msgspec.structs.replace(CONFIG, code_version=code_version)
    async with Runtime(store=store, config=config) as runtime:
        await runtime.recover()
        try:
            await runtime.handle(run_id).result()
        except Exception as exc:
            return exc
    raise AssertionError("version 2 replayed a version 1 run without diverging")


RUN = "ledger"
"""The run ``damaged_log`` leaves."""
DAMAGE = {"payload": HEADER_SIZE + 30, "frame-header": 1}
"""Where in a record a byte is flipped: its sealed payload, or its frame's length."""


@dataclass
class Damaged:
    """An interrupted run whose log has a flipped byte in the record at ``position``."""

    position: int
    segment: Path
    checkpoint: int


async def damaged_log(path: Path, *, after_checkpoint: int, where: str = "payload") -> Damaged:
    """Interrupt run ``RUN`` in a file store at ``path``, then flip a byte in one record.

    The record is ``after_checkpoint`` positions from the newest checkpoint's
    (negative: before it); ``where`` is a key of ``DAMAGE``. ``WRITTEN`` is
    emptied, for the recovery to fill.
    """
    store = FileStore(path)
    try:
        await interrupted_run(store, RUN)
        newest = (await store.list_snapshots(RUN))[-1].position
        length = await store.log_length(RUN)
    finally:
        await store.aclose()
    assert 2 <= newest < length, "the run must have records both before and after its checkpoint"
    position = newest + after_checkpoint
    (segment,) = (path / "runs" / RUN / "log").iterdir()
    data = bytearray(segment.read_bytes())
    offset = scan(bytes(data), location="", last=True).offsets[position]
    data[offset + DAMAGE[where]] ^= 0x5A
    segment.write_bytes(bytes(data))
    WRITTEN.clear()
    return Damaged(position, segment, newest)
