"""Recovery after many updates: what resuming a run costs per update it has answered.

A run (``Tally``) answers N updates while live, then pauses at a
``wait_for_input``; the benchmark times ``runtime.resume`` of it on a file
store: the attempt replays the run's log and reads its inbox once (the N
updates, their N replies, the signal and the answer), and posts nothing but
the answer. Baseline in the same run: the same resume with no update. The
column per update is ``(resume - baseline) / N``; a resume linear in the
inbox keeps it flat as N grows. Run: ``python benchmarks/interaction_updates.py
[--quick]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec
from _machine import cpu_model

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig, update
from actorflow.errors import RunPaused
from actorflow.storage import FileStore

QUICK = "--quick" in sys.argv
SIZES = [0, 50, 100, 200] if QUICK else [0, 100, 200, 400]
REPEATS = 1 if QUICK else 3


class Add(msgspec.Struct, frozen=True):
    n: int


class Done(msgspec.Struct, frozen=True):
    pass


class Tally(Orchestrator):
    total: int

    @update
    async def add(self, ctx: RunContext, message: Add) -> int:
        self.total += message.n
        return self.total

    async def run(self, ctx: RunContext, _: None) -> str:
        self.total = 0
        await ctx.wait_for(Done)
        return await ctx.wait_for_input("more?")


async def _resume_after(updates: int, folder: Path) -> float:
    config = RuntimeConfig(signal_poll_interval=0.01)
    async with Runtime(store=FileStore(folder), config=config) as runtime:
        handle = await runtime.start(Tally, None, run_id="tally")
        for i in range(updates):
            await runtime.update("tally", Add(1), update_id=f"u{i}")
        await runtime.signal("tally", Done())
        try:
            await handle.result()
        except RunPaused:
            pass
        start = time.perf_counter()
        assert await runtime.resume("tally", "done") == "done"
        return time.perf_counter() - start


async def main() -> None:
    rows: dict[int, list[float]] = {n: [] for n in SIZES}
    for _ in range(REPEATS):
        for n in SIZES:  # alternated, so load drifts over every size alike
            with tempfile.TemporaryDirectory() as folder:
                rows[n].append(await _resume_after(n, Path(folder) / "store"))
    base = statistics.median(rows[0])
    print(f"python {sys.version.split()[0]}, {cpu_model()}")
    print(f"resume on a file store after N answered updates; median of {REPEATS}; times in ms")
    print(f"{'updates':>8} {'resume':>10} {'per update':>11} {'x no-update':>12}")
    for n in SIZES:
        took = statistics.median(rows[n])
        per = (took - base) / n * 1000 if n else 0.0
        print(f"{n:>8} {took * 1000:>10.1f} {per:>11.3f} {took / base:>11.2f}x")


if __name__ == "__main__":
    for backend in ("asyncio", "trio"):
        print(f"-- {backend}")
        anyio.run(main, backend=backend)
