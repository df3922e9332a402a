"""PostgresStore benchmark (issue 28): runs, signals, queries and workers on PostgreSQL.

Run: ``python benchmarks/postgres_store.py [--quick] [--only=1234]``. The script
starts its own PostgreSQL server (Debian's ``postgresql``; as root, run as
the ``postgres`` user) on 127.0.0.1 with a temporary data folder and the
server's default durability (``fsync=on``, ``synchronous_commit=on``), and
stops it at the end. Four tables:

1. A 10-phase run durable after every phase (``peers.py``'s shape 1):
   actorflow's ``Phases`` on a PostgresStore in ``sync`` durability (and the
   same without retention, whose work after each run overlaps the next)
   against LangGraph's 10-node graph compiled with ``PostgresSaver``,
   ``invoke(..., durability="sync")``, on the same server (a database each),
   and the floor: the run's 11 durable commits as bare INSERTs. Variants take
   turns in rounds; the ratio is p50 over p50. Target 0.6x or less.
2. Signal round trip: a sender process posts a ``Ping`` (with its send time)
   to a live run that loops on ``ctx.wait_for(Ping)`` in ``sync``
   durability; round trip = the wait's return minus the send time (the
   post's commit, the NOTIFY, the owner's read, the durable record). The
   sender sends the next once the run's log holds the last. Target ≤ 5 ms p50.
3. ``runtime.query`` of a live run holding a 1,000-task state, from another
   runtime on its own store object (``interaction_query.py``'s shape), with
   and without decoding the state. Target ≤ 5 ms p50.
4. 8 worker processes adopt 1,000 queued runs (each run is driven once:
   every run's side line is written once), then a worker holding runs blocked
   in a step is SIGKILLed and the survivors take its runs over: from the
   kill to every run's manifest naming a survivor. The bound is the
   survivors' ``poll_interval`` (claims are session advisory locks: the
   server frees them when the killed worker's connection drops).

Figures go to benchmarks/RESULTS.md ("PostgreSQL store").
"""

from __future__ import annotations

import functools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import msgspec
from _machine import cpu_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actorflow import Durability, Orchestrator, RunContext, Runtime, RuntimeConfig  # noqa: E402
from actorflow.storage import RunStatus, StepRecord  # noqa: E402
from actorflow.storage.postgres import PostgresStore  # noqa: E402

QUICK = "--quick" in sys.argv
ONLY = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), "1234")
ROUNDS = 3 if QUICK else 10
RUNS = 5  # timed runs per variant per round, after one warm-up
PINGS = 60 if QUICK else 200
ADOPTED = 200 if QUICK else 1000
WORKERS = 8
HELD = 20  # runs the killed worker holds, blocked in a step


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- 1. ten phases, durable every phase ------------------------------------------


async def af_runs(dsn: str, n: int, *, retention: bool = True) -> list[float]:
    from peers import UNITS, Phases

    times = []
    config = RuntimeConfig(durability=Durability.SYNC)
    if not retention:
        config = msgspec.structs.replace(config, retention=None)
    store = PostgresStore(dsn, schema="bench_phases")
    async with store, Runtime(store=store, config=config) as runtime:
        assert await runtime.run(Phases, UNITS) == UNITS
        for _ in range(n):
            start = time.perf_counter()
            await runtime.run(Phases, UNITS)
            times.append(time.perf_counter() - start)
    return times


def lg_runs(dsn: str, n: int) -> list[float]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from peers import UNITS, _thread, lg_builder

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        graph = lg_builder().compile(checkpointer=saver)
        assert len(graph.invoke({"records": []}, _thread(), durability="sync")["records"]) == UNITS
        times = []
        for _ in range(n):
            start = time.perf_counter()
            graph.invoke({"records": []}, _thread(), durability="sync")
            times.append(time.perf_counter() - start)
    return times


def floor_runs(dsn: str, n: int) -> list[float]:
    """The floor: the 11 durable commits of a 10-phase run (each phase's 1 KB record, then
    the end), as single-row INSERTs on one connection, with no library around them."""
    import psycopg
    from peers import UNITS, record

    times = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, d bytea)")
        rows = [record(k).encode() for k in range(UNITS)] + [b"end"]
        for _ in range(n + 1):
            start = time.perf_counter()
            for data in rows:
                conn.execute("INSERT INTO bench_floor (d) VALUES (%s)", (data,))
            times.append(time.perf_counter() - start)
    return times[1:]


def phases(server: Any) -> None:
    server.sql("CREATE DATABASE bench_lg")
    variants: list[tuple[str, Any]] = [
        ("actorflow PostgresStore, sync", lambda: anyio.run(af_runs, server.dsn(), RUNS)),
        (
            "  the same without retention",
            lambda: anyio.run(functools.partial(af_runs, retention=False), server.dsn(), RUNS),
        ),
        ("LangGraph PostgresSaver, sync", lambda: lg_runs(server.dsn("bench_lg"), RUNS)),
        ("floor: 11 durable INSERTs", lambda: floor_runs(server.dsn(), RUNS)),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for r in range(ROUNDS):
        turn = variants[r % len(variants) :] + variants[: r % len(variants)]
        for name, run in turn:
            times[name] += run()
    print(f"\n1. 10-phase run, durable every phase ({ROUNDS} rounds x {RUNS} runs; ms)")
    print(f"{'variant':<36}{'p50':>9}{'p90':>9}")
    for name, taken in times.items():
        print(f"{name:<36}{_ms(_p(taken, 0.5)):>9}{_ms(_p(taken, 0.9)):>9}")
    af, lg = times[variants[0][0]], times[variants[2][0]]
    print(f"{'ratio actorflow / LangGraph (p50)':<36}{_p(af, 0.5) / _p(lg, 0.5):>8.2f}x")
    floor = _p(times[variants[3][0]], 0.5)
    print(f"{'ratio floor / LangGraph (p50)':<36}{floor / _p(lg, 0.5):>8.2f}x")


# --- 2. signal round trip -----------------------------------------------------------


class Ping(msgspec.Struct, frozen=True):
    n: int
    sent: float


class Echo(Orchestrator):
    __actorflow_name__ = "bench.postgres.Echo"
    latencies: list[float] = []

    async def run(self, ctx: RunContext, count: int) -> int:
        for _ in range(count):
            ping = await ctx.wait_for(Ping)
            Echo.latencies.append(time.time() - ping.sent)
        return count


async def _send(dsn: str, run_id: str, count: int) -> None:
    """The sender process: one ping at a time; prints the bare post times (ms)."""
    posts = []
    async with PostgresStore(dsn, schema="bench_signals") as store, Runtime(store=store) as rt:
        for n in range(count):
            start = time.time()
            await rt.signal(run_id, Ping(n, start))
            posts.append((time.time() - start) * 1000)
            while True:  # until the run took it: its wait's record is in the log
                log = await store.read_log(run_id)
                if sum(isinstance(r, StepRecord) and r.kind == "wait" for r in log) > n:
                    break
                await anyio.sleep(0.001)
    print(msgspec.json.encode(posts).decode(), flush=True)


async def _owner(dsn: str, backend: str) -> tuple[list[float], list[float]]:
    Echo.latencies = []
    run_id = f"echo-{uuid.uuid4().hex[:8]}"
    config = RuntimeConfig(durability=Durability.SYNC)
    store = PostgresStore(dsn, schema="bench_signals")
    async with store, Runtime(store=store, config=config) as runtime:
        handle = await runtime.start(Echo, PINGS, run_id=run_id)
        sender = await anyio.run_process(
            [sys.executable, __file__, "send", dsn, run_id, str(PINGS), backend],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=True,
        )
        await handle.result()
    posts: list[float] = msgspec.json.decode(sender.stdout.strip().splitlines()[-1])
    return [x * 1000 for x in Echo.latencies], posts


def signals(server: Any) -> None:
    print(f"\n2. signal round trip from another process ({PINGS} pings, one at a time; ms)")
    print(f"{'loop':<12}{'trip p50':>10}{'trip p90':>10}{'post p50':>10}")
    for backend in ("asyncio", "trio"):
        trips, posts = anyio.run(_owner, server.dsn(), backend, backend=backend)
        trip, p90 = statistics.median(trips), _p(trips, 0.9)
        print(f"{backend:<12}{trip:>10.2f}{p90:>10.2f}{statistics.median(posts):>10.2f}")


# --- 3. query of a 1,000-task state ---------------------------------------------------


async def _queries(dsn: str) -> dict[str, tuple[float, float]]:
    import interaction_query

    if QUICK:
        interaction_query.ROUNDS = 30
    schema = f"bench_query_{uuid.uuid4().hex[:6]}"
    async with PostgresStore(dsn, schema=schema) as a, PostgresStore(dsn, schema=schema) as b:
        return await interaction_query._measure(a, b)


def queries(server: Any) -> None:
    print("\n3. runtime.query of a live run with a 1,000-task state (p50 / p95 ms)")
    for backend in ("asyncio", "trio"):
        results = anyio.run(_queries, server.dsn(), backend=backend)
        print(backend)
        for name, (p50, p95) in results.items():
            if not name.startswith("--"):
                print(f"  {name:<34}{p50:>9.2f} /{p95:>7.2f}")


# --- 4. workers adopting runs, and a take-over after a SIGKILL -------------------------


async def _start_worker(url: str, env: dict[str, str], poll: float) -> Any:
    from tests.runtime.workflow import worker_app

    command = worker_app.worker_command(url, poll=poll)
    return await anyio.open_process(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _side(path: Path) -> list[tuple[str, str, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        run_id, step_id, pid = line.split()
        out.append((run_id, step_id, int(pid)))
    return out


async def _adopt(server: Any, folder: Path) -> tuple[float, int, int, list[float]]:
    from tests.runtime.workflow import worker_app

    schema = f"bench_workers_{uuid.uuid4().hex[:6]}"
    url = f"{server.dsn()}?schema={schema}"
    side, gate = folder / "side", folder / "gate"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ACTORFLOW_TEST_SIDE": str(side),
        "ACTORFLOW_TEST_GATE": str(gate),
        "ACTORFLOW_LOG_LEVEL": "error",
    }
    poll = 0.5
    store = PostgresStore(server.dsn(), schema=schema)
    takeovers: list[float] = []
    async with store, Runtime(store=store) as client:
        gate.write_text("open")  # the chains run through
        ids = [await client.submit(worker_app.WorkerChain, i * 1000) for i in range(ADOPTED)]
        workers = [await _start_worker(url, env, poll) for _ in range(WORKERS)]
        start = time.perf_counter()
        try:
            with anyio.fail_after(600):
                for run_id in ids:
                    # other processes drive them: nothing to wait on but the manifests
                    while (await store.read_run(run_id)).status is not RunStatus.COMPLETED:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
            adopt_time = time.perf_counter() - start
            lines = _side(side)
            firsts = [(r, s) for r, s, _ in lines]
            twice = len(firsts) - len(set(firsts))  # a step driven by two workers
            drivers = len({pid for _, _, pid in lines})
            # take-over: the gate closes, new runs block in their second step
            gate.unlink()
            for round_ in range(3 if QUICK else 5):
                held = [
                    await client.submit(worker_app.WorkerChain, 10**6 + round_ * 1000 + i)
                    for i in range(HELD)
                ]
                while True:  # every held run is blocked in its second step, at the gate
                    lines = _side(side)
                    steps = [r for r, _, _ in lines if r in held]
                    if all(steps.count(r) >= 2 for r in held):
                        break
                    await anyio.sleep(0.02)
                owners = {r: pid for r, _, pid in lines if r in held}
                victim_pid = max(set(owners.values()), key=list(owners.values()).count)
                victim = next(w for w in workers if w.pid == victim_pid)
                victims = [r for r, pid in owners.items() if pid == victim_pid]
                killed = time.perf_counter()
                victim.send_signal(signal.SIGKILL)
                await victim.wait()
                workers.remove(victim)
                while True:  # every run the victim held is running under a survivor
                    names = [(await store.read_run(r)).owner for r in victims]
                    if all(n and f":{victim_pid}:" not in n for n in names):
                        break
                    await anyio.sleep(0.005)
                takeovers.append(time.perf_counter() - killed)
                gate.write_text("open")  # the held runs finish before the next round
                for r in held:
                    while (await store.read_run(r)).status is not RunStatus.COMPLETED:  # noqa: ASYNC110
                        await anyio.sleep(0.02)
                gate.unlink()
                workers.append(await _start_worker(url, env, poll))
            gate.write_text("open")
        finally:
            for w in workers:
                w.kill()
                await w.wait()
    return adopt_time, twice, drivers, takeovers


def adoption(server: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="af-pg-workers-") as tmp:
        adopt_time, twice, drivers, takeovers = anyio.run(_adopt, server, Path(tmp))
    print(f"\n4. {WORKERS} worker processes adopting {ADOPTED} runs; SIGKILL take-over")
    print(
        f"  all {ADOPTED} runs completed in {adopt_time:.1f} s by {drivers} workers; "
        f"steps driven twice: {twice}"
    )
    print(
        f"  take-over after SIGKILL ({len(takeovers)} kills, {HELD} held runs): "
        f"p50 {_ms(_p(takeovers, 0.5))} ms, max {_ms(max(takeovers))} ms "
        "(bound: poll_interval 500 ms)"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "send":
        anyio.run(_send, sys.argv[2], sys.argv[3], int(sys.argv[4]), backend=sys.argv[5])
        return
    from tests.storage.pg_server import running_server

    print(f"python {sys.version.split()[0]}, {cpu_model()}, {os.cpu_count()} cores")
    with running_server() as server:
        version = server.sql("SHOW server_version")[0][0]
        print(f"PostgreSQL {version} on 127.0.0.1, fsync on, synchronous_commit on")
        if "1" in ONLY:
            phases(server)
        if "2" in ONLY:
            signals(server)
        if "3" in ONLY:
            queries(server)
        if "4" in ONLY:
            adoption(server)


if __name__ == "__main__":
    main()
