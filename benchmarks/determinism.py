"""What the determinism guard costs a run.

Run: ``.venv/bin/python benchmarks/determinism.py [--quick] [--backend=asyncio|trio]``.
A run of N asks to one agent (MemoryStore, default mode) with the guard
``off`` and in its default ``warn`` mode, the two taking turns run by run in
one process; the ratio compares medians of the same sitting. Then the cost of
one ``time.time()`` call from code the guard does not judge, with the guard's
wrappers in place and without them.
"""

from __future__ import annotations

import os
import statistics
import sys
import timeit

import anyio
from _ask_run import us_per_ask
from _machine import cpu_model

from actorflow import RuntimeConfig
from actorflow.runtime import Determinism
from actorflow.runtime.workflow._determinism import guarded

QUICK = "--quick" in sys.argv
BACKEND = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--backend=")), "asyncio")
ASKS = 500 if QUICK else 2000
ROUNDS = 5 if QUICK else 15


async def one_run(mode: Determinism) -> float:
    """Microseconds per ask of one run."""
    return await us_per_ask(RuntimeConfig(determinism=mode, retention=None), ASKS)


def clock_call_ns() -> tuple[float, float]:
    """ns per ``time.time()`` from the standard library (timeit): plain, and under a guard."""
    plain = min(timeit.repeat("time.time()", "import time", number=200_000, repeat=5))
    # wrappers in place and this code guarded (it is not the user's: never judged)
    with guarded("bench", Determinism.WARN):
        wrapped = min(timeit.repeat("time.time()", "import time", number=200_000, repeat=5))
    return plain / 200_000 * 1e9, wrapped / 200_000 * 1e9


def main() -> None:
    times: dict[Determinism, list[float]] = {Determinism.OFF: [], Determinism.WARN: []}
    for i in range(ROUNDS):
        order = [Determinism.OFF, Determinism.WARN]
        for mode in order if i % 2 == 0 else reversed(order):
            times[mode].append(anyio.run(one_run, mode, backend=BACKEND))
    plain, wrapped = clock_call_ns()
    off = statistics.median(times[Determinism.OFF])
    warn = statistics.median(times[Determinism.WARN])
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {sys.version.split()[0]}")
    print(f"backend {BACKEND}; {ROUNDS} runs each of {ASKS} asks, alternated; medians\n")
    print("| measure | value |")
    print("|---|---:|")
    print(f"| µs per ask, guard off | {off:.2f} |")
    print(f"| µs per ask, guard warn (default) | {warn:.2f} |")
    print(f"| warn / off | {warn / off:.3f} |")
    print(f"| ns per time.time(), no wrappers | {plain:.0f} |")
    print(f"| ns per time.time(), wrappers in place, not judged | {wrapped:.0f} |")


if __name__ == "__main__":
    main()
