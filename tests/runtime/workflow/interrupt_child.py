"""The child program of the Ctrl-C / SIGTERM tests: many concurrent runs with big states.

Run as ``python -m tests.runtime.workflow.interrupt_child <store_dir> <backend> <mode>``
with mode ``start`` (start ``RUNS`` runs of ``BigStates`` at once, checkpointing
after every step, and wait for them) or ``recover`` (``runtime.recover()``).

It prints ``READY`` once its runtime is open, ``STARTED`` once its runs are
in the store, ``P <run_id> <step>`` for every step a run finished (so the
parent signals it mid-run on an event, not a timer), and ``RESULT <json>``
(the statuses in the store; empty after SIGTERM). SIGINT ends it with
``KeyboardInterrupt``; SIGTERM cancels its work the way docs/recovery.md
shows. Either way the parent checks the store, not the output.
"""

from __future__ import annotations

import random
import signal
import sys
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.storage import FileStore

if TYPE_CHECKING:
    from collections.abc import Callable

RUNS = 10
"""How many runs ``start`` starts at once."""

STEPS = 4
"""Steps per phase (three phases)."""

STATE_BYTES = 300_000
"""How much an agent's state grows by per step (incompressible bytes)."""

ON_STEP: Callable[[str], object] | None = None
"""Told ``<run_id> <phase>/<i>`` after every step a run finished (the child prints it)."""

CHILD_TIMEOUT = 60.0
"""The child gives up on its own after this long (the parent bounds it too)."""


class Grow(Request["Grown"], frozen=True):
    phase: str
    step: int


class Grown(msgspec.Struct, frozen=True):
    size: int


class Pile(msgspec.Struct):
    data: bytes = b""
    steps: int = 0


class BigWorker(Specialist):
    """Keeps a state of STATE_BYTES incompressible bytes, renewed on every step."""

    __actorflow_name__ = "tests.interrupt.BigWorker"
    state: Pile

    @handler
    async def grow(self, task: Grow) -> Grown:
        await anyio.lowlevel.checkpoint()
        self.state.data = random.randbytes(STATE_BYTES)
        self.state.steps += 1
        return Grown(len(self.state.data))


class BigStates(Orchestrator):
    """Three phases of STEPS steps each; every step replaces a big agent state."""

    __actorflow_name__ = "tests.interrupt.BigStates"

    async def _steps(self, ctx: RunContext, name: str) -> int:
        worker = await ctx.spawn(BigWorker, name="worker")
        total = 0
        for i in range(STEPS):
            grown = await ctx.ask(worker, Grow(name, i))
            if ON_STEP is not None:
                ON_STEP(f"{ctx.run_id} {name}/{i}")
            total += grown.size
        return total

    @phase
    async def first(self, ctx: RunContext) -> int:
        return await self._steps(ctx, "first")

    @phase
    async def second(self, ctx: RunContext) -> int:
        return await self._steps(ctx, "second")

    @phase
    async def third(self, ctx: RunContext) -> int:
        return await self._steps(ctx, "third")

    async def run(self, ctx: RunContext, label: str) -> int:
        return await self.first(ctx) + await self.second(ctx) + await self.third(ctx)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_ids() -> list[str]:
    return [f"big-{i:02d}" for i in range(RUNS)]


async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
    """SIGINT or SIGTERM cancels ``scope``, as docs/recovery.md shows."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def work(runtime: Runtime, mode: str) -> None:
    if mode == "recover":
        await runtime.recover()
        return
    handles = [await runtime.start(BigStates, rid, run_id=rid) for rid in run_ids()]
    emit("STARTED")
    for handle in handles:
        await handle.wait()


async def main(store_dir: str, mode: str) -> None:
    global ON_STEP  # this process's hook, set once at its start
    ON_STEP = lambda step: emit(f"P {step}")  # noqa: E731
    store = FileStore(store_dir)
    statuses: dict[str, str] = {}  # stays empty when SIGTERM cancels the work
    try:
        with anyio.fail_after(CHILD_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_on_sigterm, tg.cancel_scope)
                async with Runtime(store=store, shutdown_timeout=2.0) as runtime:
                    emit("READY")
                    await work(runtime, mode)
                    statuses = {m.run_id: str(m.status) for m in await runtime.runs()}
                tg.cancel_scope.cancel()
    finally:
        await store.aclose()
    emit("RESULT " + msgspec.json.encode(statuses).decode())


if __name__ == "__main__":
    _, folder, backend, how = sys.argv
    anyio.run(main, folder, how, backend=backend)
