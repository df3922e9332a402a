"""The child of the ``actorflow runs`` progress tests: a run held inside its ``evaluate`` phase.

Run as ``python -m tests.cli.progress_child <store_dir> <run_id> <backend>``.

The run gathers in ``GATHERED`` steps, each followed by a checkpoint it waits
for (none coalesces: with the phase's end, ``GATHERED + 1`` checkpoints; the
phase's start, at position 0, takes none). Then it enters ``evaluate`` and
waits for the checkpoint of ``gather``'s end: the checkpoint ``evaluate``'s
start asks for, at the same log position, coalesces with it, so no
checkpoint names ``evaluate``. It logs
``SCORED`` steps there (durability ``sync``: each is in the log when it
returns; no trigger takes a checkpoint) and holds.

The child then prints ``HELD <pid>``, and the run holds until the parent
kills it (SIGKILL) or interrupts it (SIGINT, which cancels the work as
docs/recovery.md shows: the run is stored ``interrupted``). A test running the
workflow in-process lets it finish with ``GATES.release``.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
import anyio.abc
import msgspec

from actorflow import (
    CheckpointTriggers,
    Durability,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.storage import FileStore

GATHERED = 6
"""Steps of ``gather``, each followed by a manual checkpoint."""

SCORED = 3
"""Steps of ``evaluate`` logged after its phase-start checkpoint."""

CHILD_TIMEOUT = 60.0
"""The child gives up on its own after this long (the parent bounds it too)."""

CONFIG = RuntimeConfig(
    durability=Durability.SYNC,  # a step's record is in the log once the step returns
    triggers=CheckpointTriggers(
        every_steps=None, every_seconds=None, on_evaluation=False, on_error=False
    ),
    retention=None,
)


class Gates:
    """What the run waits for, and what it signals; fresh for every event loop."""

    def __init__(self) -> None:
        self.saved: dict[str, anyio.Event] = {}
        self.held = anyio.Event()
        self.release = anyio.Event()

    def checkpoint_saved(self, trigger: str) -> None:
        self.saved.setdefault(trigger, anyio.Event()).set()

    async def wait_saved(self, trigger: str) -> None:
        """Wait until a checkpoint with ``trigger`` is saved."""
        await self.saved.setdefault(trigger, anyio.Event()).wait()


GATES = Gates()
"""This process's gates (a test running the workflow in-process makes new ones)."""


class Score(Request["Scored"], frozen=True):
    item: int


class Scored(msgspec.Struct, frozen=True):
    value: int


class Scorer(Specialist):
    __actorflow_name__ = "tests.cli.progress.Scorer"

    @handler
    async def score(self, task: Score) -> Scored:
        return Scored(task.item * 2)


class Review(Orchestrator):
    """Gathers with a checkpoint per step, then holds inside ``evaluate``."""

    __actorflow_name__ = "tests.cli.progress.Review"

    @phase
    async def gather(self, ctx: RunContext) -> int:
        scorer = await ctx.spawn(Scorer, name="scorer")
        total = 0
        for i in range(GATHERED):
            total += (await ctx.ask(scorer, Score(i))).value
            ctx.checkpoint(f"gathered {i}")
            await GATES.wait_saved(f"manual:gathered {i}")
        return total

    @phase
    async def evaluate(self, ctx: RunContext, gathered: int) -> int:
        scorer = await ctx.spawn(Scorer, name="evaluator")
        await GATES.wait_saved("phase_end")
        for i in range(SCORED):
            gathered += (await ctx.ask(scorer, Score(i))).value
        GATES.held.set()
        await GATES.release.wait()
        return gathered

    async def run(self, ctx: RunContext, _: None) -> int:
        return await self.evaluate(ctx, await self.gather(ctx))


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def watch_checkpoints(runtime: Runtime, run_id: str) -> None:
    async for event in runtime.handle(run_id).events(emits=False):
        if event.name == "checkpoint_saved":
            GATES.checkpoint_saved(event["trigger"])


async def announce_held() -> None:
    await GATES.held.wait()
    emit(f"HELD {os.getpid()}")


async def stop_on_signal(
    scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()  # SIGINT is ours from here on, before the run can hold
        async for _ in signals:
            scope.cancel()
            return


async def main(store_dir: str, run_id: str) -> None:
    store = FileStore(store_dir)
    try:
        with anyio.fail_after(CHILD_TIMEOUT):
            async with anyio.create_task_group() as tg:
                await tg.start(stop_on_signal, tg.cancel_scope)
                async with Runtime(store=store, config=CONFIG, shutdown_timeout=5.0) as runtime:
                    handle = await runtime.start(Review, None, run_id=run_id)
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(watch_checkpoints, runtime, run_id)
                        inner.start_soon(announce_held)
                        await handle.result()
                        inner.cancel_scope.cancel()
                tg.cancel_scope.cancel()
    finally:
        await store.aclose()


if __name__ == "__main__":
    _, folder, rid, backend = sys.argv
    anyio.run(main, folder, rid, backend=backend)
