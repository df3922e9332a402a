"""The child program of the loss-window SIGKILL tests (the default, ``batched``, mode).

Run as ``python -m tests.runtime.workflow.loss_window_child <store_dir> <run_id> <backend> <mode>``
with mode ``start`` (run ``FanOutTeam``) or ``recover`` (``runtime.recover()``).

One phase asks ``TASKS`` callers at once; caller ``n`` answers ``n * SPACING``
seconds after its task starts, as LLM calls finish at spread-out times (in
``start`` mode the last one never does, so the run is still going when the
parent's kill lands; in ``recover`` mode, which nobody kills and whose
timing no check reads, callers answer at once). Each
execution is appended to ``<store_dir>.executions`` (``<pid> <agent>``, with
fsync) and printed as ``X <agent>``. After every log append the store prints
``D <agent> ...``: the callers whose results that append made durable. The
child prints ``READY`` once its runtime is open and ``RESULT <json>`` at the end.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.storage import FileStore, StepRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import LogRecord

TASKS = 10
SPACING = 0.1
CHILD_TIMEOUT = 60.0


def side_file(store_dir: str) -> str:
    """Where the children working on ``store_dir`` write their executions."""
    return store_dir.rstrip("/") + ".executions"


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class _Side:
    fd = -1
    hold_last = False  # in ``start`` mode the last caller never answers: the run cannot end
    spread = False  # in ``start`` mode answers come at spread-out times


SIDE = _Side()


class Job(Request[str], frozen=True):
    n: int


class Caller(Specialist):
    __actorflow_name__ = "tests.loss_window_child.Caller"

    @handler
    async def call(self, job: Job) -> str:
        if SIDE.hold_last and job.n == TASKS - 1:
            await anyio.sleep_forever()
        if SIDE.spread:
            await anyio.sleep(job.n * SPACING)  # the child stands in for a slow LLM call
        os.write(SIDE.fd, f"{os.getpid()} {self.name}\n".encode())
        os.fsync(SIDE.fd)
        emit(f"X {self.name}")
        return f"answer {job.n}"


class FanOutTeam(Orchestrator):
    __actorflow_name__ = "tests.loss_window_child.FanOutTeam"

    @phase
    async def ask_all(self, ctx: RunContext, n: int) -> list[str]:
        team = [await ctx.spawn(Caller, name=f"caller-{i}") for i in range(n)]
        return await ctx.gather(*(ctx.ask(team[i], Job(i)) for i in range(n)))

    async def run(self, ctx: RunContext, n: int) -> list[str]:
        return await self.ask_all(ctx, n)


def expected() -> list[str]:
    """The result of a run never killed."""
    return [f"answer {i}" for i in range(TASKS)]


class ReportingStore(FileStore):
    """Tells the parent which callers' results each log append made durable."""

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        length = await super().append(run_id, records)
        asks = [r.target for r in records if isinstance(r, StepRecord) and r.kind == "ask"]
        if asks:
            emit("D " + " ".join(str(a) for a in asks))
        return length


async def main(store_dir: str, run_id: str, mode: str) -> None:
    SIDE.fd = os.open(side_file(store_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    SIDE.hold_last = SIDE.spread = mode == "start"
    store = ReportingStore(store_dir)
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(store=store) as runtime:
            emit("READY")
            if mode == "recover":
                results = await runtime.recover()
            else:
                results = {run_id: await runtime.run(FanOutTeam, TASKS, run_id=run_id)}
    await store.aclose()
    emit("RESULT " + msgspec.json.encode(results).decode())


if __name__ == "__main__":
    _, folder, run, backend, how = sys.argv
    anyio.run(main, folder, run, how, backend=backend)
