"""Query benchmark (issue 14): ``runtime.query(run_id)`` of a live run with a 1000-task state.

Run: ``python benchmarks/interaction_query.py [--quick]``. A run's agent holds
the issue's "1000 tasks" state (~290 KB of MessagePack, so a blob); the run has
taken 40 steps and made 10 decisions, and waits in ``ctx.wait_for`` with 3
untaken messages in its inbox, while its owner stays live. Two such runs: one
snapshotted just before its wait (a short log tail after the snapshot), one
half way (a tail of some twenty records; S3 keeps each append as an object).
Another runtime, on its own store object (as another process would be),
queries it. Baselines in the same run: reading
the manifest alone (``store.read_run``), and the view alone (``load_view``:
the newest snapshot plus the log after it, which a query adds the manifest
and inbox to). ``+ state`` decodes the 1000-task state too (one blob read).
Memory, file and, when ``weed`` is installed, S3 (SeaweedFS ``weed mini`` on
127.0.0.1, as ``benchmarks/s3.py``); asyncio and trio. Targets: file ≤ 5 ms,
S3 ≤ 25 ms. Figures go to benchmarks/RESULTS.md ("Interaction: queries").
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from _machine import cpu_model
from _servers import local_seaweed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.runtime.workflow._replay import load_view
from actorflow.storage import EventRecord, FileStore, MemoryStore, S3Store, Store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from tests.storage.s3_servers import S3Server

QUICK = "--quick" in sys.argv
ROUNDS = 30 if QUICK else 200
STEPS = 40


class Task(msgspec.Struct):
    id: str
    status: str
    result: str
    started: float
    finished: float
    duration: float


class Board(msgspec.Struct):
    tasks: list[Task] = msgspec.field(default_factory=list)


class Touch(Request[int], frozen=True):
    i: int


class Go(msgspec.Struct, frozen=True):
    pass


class Hint(msgspec.Struct, frozen=True):
    text: str


class Planner(Specialist):
    __actorflow_name__ = "bench.query.Planner"
    state: Board

    @handler
    async def touch(self, t: Touch) -> int:
        task = self.state.tasks[t.i]
        task.duration += 0.01  # a new state each step
        return t.i


class Watched(Orchestrator):
    __actorflow_name__ = "bench.query.Watched"

    async def run(self, ctx: RunContext, checkpoint_at: int) -> int:
        planner = await ctx.spawn(Planner, name="planner", state=_board())
        for i in range(STEPS - 1):
            await ctx.ask(planner, Touch(i))
            if i % 4 == 0:
                await ctx.decide(f"d{i}", rationale="because")
            if i == checkpoint_at:
                ctx.checkpoint("bench")
        await ctx.wait_for(Go)
        return 0


def _board() -> Board:
    """The issue's "1000 tasks" state: id, status, ~200-char result, timestamps, duration."""
    return Board(
        [
            Task(
                id=f"task-{i:04d}",
                status="done" if i % 7 else "failed",
                result=(f"summary of task {i}: " + "lorem ipsum dolor sit amet " * 8)[:200],
                started=1_700_000_000.0 + i,
                finished=1_700_000_000.5 + i,
                duration=0.5 + (i % 13) / 10,
            )
            for i in range(1000)
        ]
    )


async def _until_waiting(store: Store, run_id: str) -> None:
    while True:
        log = await store.read_log(run_id)
        waiting = any(isinstance(r, EventRecord) and r.kind == "wait_requested" for r in log)
        if waiting and await store.list_snapshots(run_id):
            return
        await anyio.sleep(0.01)


async def _timed(fn: Callable[[], Awaitable[Any]], rounds: int) -> list[float]:
    for _ in range(3):  # warm up
        await fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t) * 1000)
    return times


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ignore(*_: Any, **__: Any) -> None:
    pass


async def _measure(owner_store: Store, reader_store: Store) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    async with Runtime(store=owner_store) as owner, Runtime(store=reader_store) as reader:
        for checkpoint_at in (STEPS - 2, STEPS // 2):
            run_id = f"bench-{uuid.uuid4().hex[:8]}"
            await owner.start(Watched, checkpoint_at, run_id=run_id)
            await _until_waiting(owner_store, run_id)
            for n in range(3):
                await reader.signal(run_id, Hint(f"hint {n}"))
            query = await reader.query(run_id)
            assert len(query.inbox) == 3, query
            assert len(query.waits) == 1, query
            assert query.agents["planner"].state is not None
            assert query.agents["planner"].state.data is None  # a blob
            tail = query.position - (await reader_store.list_snapshots(run_id))[-1].position
            out[f"-- {tail} log records after the snapshot"] = (0.0, 0.0)

            async def with_state(run_id: str = run_id) -> None:
                q = await reader.query(run_id)
                await q.state("planner", Board)

            measures: dict[str, Callable[[], Awaitable[Any]]] = {
                "read_run (baseline)": partial(reader_store.read_run, run_id),
                "load_view (baseline)": partial(load_view, reader_store, run_id, _ignore),
                "query": partial(reader.query, run_id),
                "query + state": with_state,
            }
            for name, fn in measures.items():
                times = await _timed(fn, ROUNDS)
                out[f"{name}, tail {tail}"] = (_p(times, 0.5), _p(times, 0.95))
    return out


def _s3(server: S3Server) -> S3Store:
    return S3Store(
        server.bucket,
        prefix="bench-query",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
    )


async def _all(folder: Path, server: S3Server | None) -> dict[str, dict[str, tuple[float, float]]]:
    memory = MemoryStore()
    results = {"memory": await _measure(memory, memory)}
    files = folder / f"file-{uuid.uuid4().hex[:6]}"
    async with FileStore(files) as a, FileStore(files) as b:
        results["file"] = await _measure(a, b)
    if server is not None:
        async with _s3(server) as a, _s3(server) as b:
            results["s3"] = await _measure(a, b)
    return results


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="af-query-bench-") as tmp:
        folder = Path(tmp)
        with local_seaweed(folder) as server:
            print(f"machine: {os.cpu_count()} cpus, {cpu_model()}, Python {sys.version.split()[0]}")
            print(f"{ROUNDS} rounds each; p50 / p95 in ms")
            for backend in ("asyncio", "trio"):
                results = anyio.run(_all, folder, server, backend=backend)
                stores = list(results)
                print(f"\n{backend}")
                print(f"{'measure':<34}" + "".join(f"{s:>18}" for s in stores))
                for name in results["memory"]:
                    if name.startswith("--"):
                        continue
                    cells = [
                        f"{results[s][name][0]:>9.2f} /{results[s][name][1]:>7.2f}" for s in stores
                    ]
                    print(f"{name:<34}" + "".join(cells))


if __name__ == "__main__":
    main()
