"""SqliteStore against FileStore: a 10-phase run with ``sync`` durability, in one sitting.

Run: ``python benchmarks/sqlite_store.py [--quick] [--backend=asyncio|trio]``
(the full run takes about four minutes). The run is benchmark 1's shape of
``benchmarks/workflow.py`` (10 phases x 2 rounds x 8 specialists, 160 steps),
durable at every step (``Durability.SYNC``): each step's record is synced
before the orchestrator sees its result. Two variants: steps of ~1 ms CPU
(``burn()``), and steps doing nothing (the store's cost alone). Each
repetition runs one run on each store, in alternating order, so the
machine's drift hits both.
Each store lives through the sitting (one folder, one file), as a
deployment's store does. Prints p50 wall ms per run and the ratio
SqliteStore / FileStore (target: ≤ 1.2).

Then the signal round trip of ``benchmarks/interaction_signals.py`` on each
store: another process posts a ``Ping`` to a live ``sync`` run waiting in
``ctx.wait_for``; round trip = the wait's return minus the send time (the
post's durable commit, the wake-up through the FIFO beside the store, the
read, the wait's durable record). p50 and p90 ms over its pings.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

import anyio
import structlog.testing
import workflow
from _machine import cpu_model
from interaction_signals import PINGS, Echo, Ping
from workflow import PHASES, TenPhases, calibrate

from actorflow import Runtime
from actorflow.runtime import Durability, RuntimeConfig
from actorflow.storage import FileStore, SqliteStore, StepRecord, Store

QUICK = "--quick" in sys.argv
REPS = 7 if QUICK else 25
CONFIG = RuntimeConfig(durability=Durability.SYNC, retention=None)
HERE = os.path.dirname(os.path.abspath(__file__))


async def one_run(runtime: Runtime) -> float:
    """Wall seconds of one 10-phase run, from start to its result."""
    started = time.perf_counter()
    handle = await runtime.start(TenPhases, PHASES)
    await handle.result()
    return time.perf_counter() - started


async def sitting(tmp: str, burn_n: int) -> dict[str, list[float]]:
    """``REPS`` runs on each store (one store each, as a deployment keeps), alternated."""
    workflow._burn_n = burn_n
    times: dict[str, list[float]] = {"file": [], "sqlite": []}
    async with (
        Runtime(store=FileStore(os.path.join(tmp, "store")), config=CONFIG) as file_runtime,
        Runtime(store=SqliteStore(os.path.join(tmp, "store.db")), config=CONFIG) as sqlite_runtime,
    ):
        runtimes = {"file": file_runtime, "sqlite": sqlite_runtime}
        for rep in range(REPS + 1):
            order = ["file", "sqlite"] if rep % 2 else ["sqlite", "file"]
            for kind in order:
                took = await one_run(runtimes[kind])
                if rep:  # the first run of each opens its store and warms caches up
                    times[kind].append(took)
    return times


def _open(spec: str) -> Store:
    kind, _, where = spec.partition(":")
    return FileStore(where) if kind == "file" else SqliteStore(where)


async def _send(spec: str, run_id: str) -> None:
    """The sender process: one ping at a time, the next once the run took the last."""
    store = _open(spec)
    async with Runtime(store=store) as runtime:
        for n in range(PINGS):
            await runtime.signal(run_id, Ping(n, time.time()))
            while True:  # until the run took it: its wait's record is in the log
                log = await store.read_log(run_id)
                if sum(isinstance(r, StepRecord) and r.kind == "wait" for r in log) > n:
                    break
                await anyio.sleep(0.002)
    await store.aclose()


async def round_trips(spec: str, backend: str) -> list[float]:
    """Signal round trips (ms) of ``PINGS`` pings from another process."""
    Echo.latencies = []
    run_id = f"echo-{os.getpid()}-{backend}"
    store = _open(spec)
    async with Runtime(store=store, config=CONFIG) as runtime:
        handle = await runtime.start(Echo, PINGS, run_id=run_id)
        await anyio.run_process(
            [sys.executable, __file__, "send", spec, run_id, backend],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), HERE])},
            check=True,
        )
        await handle.result()
    await store.aclose()
    return [x * 1000 for x in Echo.latencies]


def signals(backends: list[str]) -> None:
    print()
    print("| signal round trip (ms) | backend | FileStore p50 / p90 | SqliteStore p50 / p90 |")
    print("|---|---|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="af-sqlite-signals-") as tmp:
        for backend in backends:
            cells = []
            for spec in (f"file:{tmp}/store", f"sqlite:{tmp}/store.db"):
                trips = anyio.run(round_trips, spec, backend, backend=backend)
                p90 = statistics.quantiles(trips, n=10)[8]
                cells.append(f"{statistics.median(trips):.2f} / {p90:.2f}")
            print(f"| {PINGS} pings, one at a time | {backend} | {cells[0]} | {cells[1]} |")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "send":
        anyio.run(_send, sys.argv[2], sys.argv[3], backend=sys.argv[4])
        return
    backends = ["asyncio", "trio"]
    for arg in sys.argv[1:]:
        if arg.startswith("--backend="):
            backends = [arg.partition("=")[2]]
    burn_ms = calibrate() * 1000
    steady = workflow._burn_n
    print(
        f"SqliteStore vs FileStore, 10-phase run (160 steps), durability sync; "
        f"{REPS} runs each, alternated. Machine: {os.cpu_count()} cores, {cpu_model()}, "
        f"Python {sys.version.split()[0]}; burn() = {burn_ms:.3f} ms"
    )
    print()
    print("| run (p50 ms) | backend | FileStore | SqliteStore | sqlite/file (≤ 1.2) |")
    print("|---|---|---:|---:|---:|")
    tmp = tempfile.mkdtemp(prefix="af-sqlite-bench-", dir=os.environ.get("BENCH_DIR"))
    try:
        with structlog.testing.capture_logs():
            for backend in backends:
                for label, n in (("steps of ~1 ms CPU", steady), ("empty steps", 0)):
                    times = anyio.run(sitting, tmp, n, backend=backend)
                    file_ms = statistics.median(times["file"]) * 1000
                    sqlite_ms = statistics.median(times["sqlite"]) * 1000
                    print(
                        f"| {label} | {backend} | {file_ms:.1f} | {sqlite_ms:.1f} | "
                        f"{sqlite_ms / file_ms:.2f}x |"
                    )
                    shutil.rmtree(tmp)
                    os.mkdir(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with structlog.testing.capture_logs():
        signals(backends)


if __name__ == "__main__":
    main()
