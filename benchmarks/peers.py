"""Peers side by side: actorflow, LangGraph, DBOS, pykka and autogen-core.

Run: ``python benchmarks/peers.py [--quick] [--only=12567] [--backend=asyncio|trio]
[--strace]`` with the peers installed (``pip install -e '.[bench]'``); without
them only actorflow's rows are printed. ``--only`` picks shapes 1 (with 3 and
4), 2, 5, 6 and 7. The full run takes a few minutes on 2 cores.

Every shape is written in each library's own idiom, in one process, and the
variants take turns in rounds (their order rotates every round), so a slower
minute of the disk hits them all alike; each ratio compares figures measured
in the same run. DBOS keeps one instance per process, so it runs in a child
process that times its own runs and hands the figures back between turns.

1. A 10-unit linear run, durable after every unit; each unit appends a 1 KB
   record to a list it returns. LangGraph: a 10-node ``StateGraph`` compiled
   with ``SqliteSaver`` (a file database), ``invoke(..., durability="sync")``,
   a fresh thread per run; its sync API, the idiomatic pairing for
   ``SqliteSaver`` (``ainvoke`` needs ``AsyncSqliteSaver`` and its aiosqlite
   thread). actorflow: an orchestrator calling 10 ``@phase`` methods on a
   FileStore, ``Durability.SYNC`` ("phases": each phase's end is durable
   before the phase returns); and the same with each unit's record coming
   from an ``ask`` step ("asks": the step's record and the phase's end are
   two appends).
   DBOS: 10 ``@DBOS.step`` calls in a ``@DBOS.workflow`` on its SQLite
   system database.
2. The same in default modes: actorflow ``batched``, LangGraph ``async``
   (DBOS has only one).
3. fsyncs, fdatasyncs, renames and links per actorflow ``sync`` run, counted
   in this process: ``os.fsync``, ``os.fdatasync``, ``os.rename``,
   ``os.replace`` and ``os.link`` are wrapped with counters for the whole
   benchmark (the FileStore's worker threads call them; SQLite's own syncs
   are made in C and are not seen). A separate pass records who called each
   one and whether ``run()`` was still awaited then or had returned
   (retention, off the run's path). ``--strace`` adds every library's
   counts from ``strace -f -c`` of a child process (SQLite's included): the
   child with 3n runs minus the child with n, over 2n.
4. The floor: the count of syncs of 3 replayed alone, one after another,
   each a new 1 KB temp file written and fsynced in a trip to the FileStore's
   worker thread, timed like a run.
5. Crash after unit 4 of 10, finish fresh, ``sync``. LangGraph: node 5 raises
   on its first attempt; a new ``SqliteSaver`` connection resumes the thread
   with ``invoke(None, config)``. actorflow: a child process is killed
   (SIGKILL) as unit 5 starts, its store is copied for each sample, and
   ``recover()`` runs in a new Runtime. Only the resume call is timed; "open +
   resume" adds opening the connection or entering the Runtime.
6. The run of 1 without durability: actorflow's ``phases`` on a MemoryStore
   (default config), LangGraph's graph compiled without a checkpointer.
7. One ask between two agents, each timed (``_peer_asks``): actorflow
   ``ref.ask``, pykka ``ActorRef.ask``, autogen-core ``send_message``.
"""

from __future__ import annotations

import base64
import gc
import importlib.util
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypedDict

import anyio
import msgspec
from _machine import cpu_model
from _peer_asks import af_asks, autogen_asks, pykka_asks

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.runtime import Durability, RuntimeConfig
from actorflow.storage import FileStore, MemoryStore
from actorflow.storage.file._threads import run_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection
    from types import FrameType

QUICK = "--quick" in sys.argv
UNITS, CRASH_AT = 10, 4  # the crash comes as the fifth unit (index 4) starts
ROUNDS = 2 if QUICK else 12
RUNS = 3 if QUICK else 5  # timed runs per variant per round, after one warm-up
CRASHES = 1 if QUICK else 3  # crash-and-resume samples per variant per round
COUNTED_RUNS = 3 if QUICK else 10  # runs of the by-caller pass, per variant
MEMORY_RUNS = 10 if QUICK else 20  # timed in-memory runs per variant per round
ASKS = 200 if QUICK else 500  # timed asks per variant per round

WORK = [0]  # units' work done in this process (a unit's record produced)


def record(k: int) -> str:
    """Unit ``k``'s 1 KB record, the same in every library.

    Random bytes in base64: repeated text would let actorflow's snapshots
    compress to almost nothing, which no real record does.
    """
    return base64.b64encode(random.Random(k).randbytes(768)).decode()


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# --- counting the syncs --------------------------------------------------------

SYNC_CALLS = ("fsync", "fdatasync")
FILE_CALLS = (*SYNC_CALLS, "rename", "replace", "link")


class Tap:
    """Counts calls of ``os.fsync`` and friends; attributes them to callers on demand."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.by_caller: Counter[tuple[str, str, str]] | None = None
        self.stage = "during run()"
        self.written = 0  # bytes through os.write and os.pwrite while by_caller is on
        self._original: dict[str, Callable[..., Any]] = {}

    def install(self) -> None:
        for name in FILE_CALLS:
            self._original[name] = original = getattr(os, name)
            setattr(os, name, self._wrap(name, original))
        for name in ("write", "pwrite"):
            self._original[name] = original = getattr(os, name)
            setattr(os, name, self._wrap_write(original))

    def uninstall(self) -> None:
        for name, original in self._original.items():
            setattr(os, name, original)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        counts = self.counts

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            if self.by_caller is not None:
                self.by_caller[(self.stage, name, _caller(sys._getframe(1)))] += 1
            return original(*args, **kwargs)

        return counted

    def _wrap_write(self, original: Callable[..., int]) -> Callable[..., int]:
        def counted(fd: int, data: Any, *args: Any) -> int:
            done = original(fd, data, *args)
            if self.by_caller is not None:
                self.written += done
            return done

        return counted

    def syncs(self) -> int:
        return sum(self.counts[n] for n in SYNC_CALLS)


TAP = Tap()


def _caller(frame: FrameType | None) -> str:
    """Where a call came from: the store's own frames, innermost first, shortened."""
    parts: list[str] = []
    while frame is not None and len(parts) < 3:
        path = frame.f_code.co_filename
        name = frame.f_code.co_name
        if "actorflow" in path and not path.endswith("_threads.py"):
            module = os.path.basename(path).removesuffix(".py").lstrip("_")
            if module == "fs" and name in ("fsync", "sync_data", "rename", "link"):
                pass  # the primitive itself says nothing the call's name does not
            elif name == "fsync_dir":
                parts.append("folder fsync")
            else:
                parts.append(f"{module}.{name}")
        frame = frame.f_back
    return " < ".join(parts) or "elsewhere"


# --- actorflow -------------------------------------------------------------------


class Phases(Orchestrator):
    """Each unit is a ``@phase``, the memoised unit of a run: a LangGraph node's equal."""

    @phase
    async def unit(self, ctx: RunContext, k: int, records: list[str]) -> list[str]:
        _maybe_crash(k)
        WORK[0] += 1
        return [*records, record(k)]

    async def run(self, ctx: RunContext, units: int) -> int:
        records: list[str] = []
        for k in range(units):
            records = await self.unit(ctx, k, records)
        return len(records)


class Write(Request[str], frozen=True):
    k: int


class Scribe(Specialist):
    @handler
    async def write(self, request: Write) -> str:
        WORK[0] += 1
        return record(request.k)


class Asks(Orchestrator):
    """Each unit is a phase whose record comes from an ``ask``: a step, durable in ``sync``."""

    @phase
    async def unit(self, ctx: RunContext, k: int, scribe: Any, records: list[str]) -> list[str]:
        _maybe_crash(k)
        text: str = await ctx.ask(scribe, Write(k))
        return [*records, text]

    async def run(self, ctx: RunContext, units: int) -> int:
        scribe = await ctx.spawn(Scribe, name="scribe")
        records: list[str] = []
        for k in range(units):
            records = await self.unit(ctx, k, scribe, records)
        return len(records)


WORKFLOWS: dict[str, type[Orchestrator]] = {"phases": Phases, "asks": Asks}
_crash_in_this_process = [False]


def _maybe_crash(k: int) -> None:
    if k == CRASH_AT and _crash_in_this_process[0]:
        os.kill(os.getpid(), signal.SIGKILL)


class Samples(msgspec.Struct):
    """Per-run seconds of one variant, with each round's own list kept apart."""

    rounds: list[list[float]] = msgspec.field(default_factory=list)
    counts: list[float] = msgspec.field(default_factory=list)  # syncs per run, units redone
    extra: list[float] = msgspec.field(default_factory=list)  # e.g. open + resume

    def all(self) -> list[float]:
        return [x for r in self.rounds for x in r]


def _config(durability: Durability) -> RuntimeConfig:
    return RuntimeConfig(durability=durability)


async def af_runs(
    path: str, workflow: str, durability: Durability, n: int
) -> tuple[list[float], float]:
    """``n`` timed runs (after one warm-up) in a Runtime of their own on the store at ``path``.

    Also returns the syncs per run, from the first timed run to the Runtime's
    exit, which waits for the last run's retention.
    """
    cls = WORKFLOWS[workflow]
    times = []
    async with Runtime(store=FileStore(path), config=_config(durability)) as runtime:
        assert await runtime.run(cls, UNITS) == UNITS
        await runtime._runs.pruner.wait()  # the warm-up's retention stays out of the count
        before = TAP.syncs()
        for _ in range(n):
            start = time.perf_counter()
            await runtime.run(cls, UNITS)
            times.append(time.perf_counter() - start)
    return times, (TAP.syncs() - before) / n


async def af_by_caller(path: str, workflow: str, n: int) -> None:
    """Runs with every sync attributed to its caller, retention waited for after each."""
    cls = WORKFLOWS[workflow]
    async with Runtime(store=FileStore(path), config=_config(Durability.SYNC)) as runtime:
        await runtime.run(cls, UNITS)
        await runtime._runs.pruner.wait()
        TAP.by_caller, TAP.written = Counter(), 0
        for _ in range(n):
            TAP.stage = "during run()"
            await runtime.run(cls, UNITS)
            TAP.stage = "after run() returned"
            await runtime._runs.pruner.wait()
    TAP.stage = "during run()"


async def af_memory_runs(workflow: str, n: int) -> list[float]:
    """``n`` timed runs (after one warm-up) on a MemoryStore, the default config."""
    cls = WORKFLOWS[workflow]
    times = []
    async with Runtime(store=MemoryStore()) as runtime:
        assert await runtime.run(cls, UNITS) == UNITS
        for _ in range(n):
            start = time.perf_counter()
            await runtime.run(cls, UNITS)
            times.append(time.perf_counter() - start)
    return times


def _new_file_synced(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, b"x" * 1024)
        os.fsync(fd)
    finally:
        os.close(fd)


async def floor_runs(folder: str, syncs: int, n: int) -> list[float]:
    """``n`` replays of ``syncs`` new-file writes + fsync, one worker-thread trip each."""
    times = []
    for _ in range(n):
        paths = [os.path.join(folder, f".tmp-{uuid.uuid4().hex}") for _ in range(syncs)]
        start = time.perf_counter()
        for path in paths:
            await run_in_thread(_new_file_synced, path)
        times.append(time.perf_counter() - start)
        for path in paths:
            os.unlink(path)
    return times


def crash_child(path: str, workflow: str) -> None:
    """In a child process: start a ``sync`` run that is killed as unit 5 starts."""
    _crash_in_this_process[0] = True

    async def main() -> None:
        config = _config(Durability.SYNC)
        async with Runtime(store=FileStore(path), config=config) as runtime:
            await runtime.run(WORKFLOWS[workflow], UNITS, run_id="crashed")

    anyio.run(main)


def build_crashed(path: str, workflow: str) -> None:
    child = multiprocessing.get_context("spawn").Process(
        target=crash_child, args=(path, workflow), daemon=True
    )
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL, child.exitcode


async def af_resume(source: str, scratch: str) -> tuple[float, float, int]:
    """Recover a copy of the crashed store: (resume s, open + resume s, units redone)."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(source, scratch)
    WORK[0] = 0
    opened = time.perf_counter()
    async with Runtime(store=FileStore(scratch), config=_config(Durability.SYNC)) as runtime:
        start = time.perf_counter()
        results = await runtime.recover()
        done = time.perf_counter()
    assert results == {"crashed": UNITS}, results
    return done - start, done - opened, WORK[0]


# --- LangGraph --------------------------------------------------------------------


class State(TypedDict):
    records: list[str]


_fail_once = [False]


class Node(Protocol):
    # LangGraph passes the state by the name ``state``: a plain Callable type hides it
    def __call__(self, state: State) -> dict[str, list[str]]: ...


def _node(k: int) -> Node:
    def unit(state: State) -> dict[str, list[str]]:
        if k == CRASH_AT and _fail_once[0]:
            _fail_once[0] = False
            raise RuntimeError("unit 5 fails on its first attempt")
        WORK[0] += 1
        return {"records": [*state["records"], record(k)]}

    return unit


def lg_builder() -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(State)
    previous = START
    for k in range(UNITS):
        builder.add_node(f"unit_{k}", _node(k))
        builder.add_edge(previous, f"unit_{k}")
        previous = f"unit_{k}"
    builder.add_edge(previous, END)
    return builder


def _lg_graph(builder: Any, db: str) -> tuple[Any, sqlite3.Connection]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    # the connection SqliteSaver.from_conn_string opens, kept to close it ourselves
    conn = sqlite3.connect(db, check_same_thread=False)
    return builder.compile(checkpointer=SqliteSaver(conn)), conn


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def lg_runs(builder: Any, db: str, durability: str, n: int) -> list[float]:
    graph, conn = _lg_graph(builder, db)
    try:
        out = graph.invoke({"records": []}, _thread(), durability=durability)
        assert len(out["records"]) == UNITS
        times = []
        for _ in range(n):
            start = time.perf_counter()
            graph.invoke({"records": []}, _thread(), durability=durability)
            times.append(time.perf_counter() - start)
        return times
    finally:
        conn.close()


def lg_plain_runs(builder: Any, n: int) -> list[float]:
    """``n`` timed runs (after one warm-up) of the graph compiled without a checkpointer."""
    graph = builder.compile()
    assert len(graph.invoke({"records": []})["records"]) == UNITS
    times = []
    for _ in range(n):
        start = time.perf_counter()
        graph.invoke({"records": []})
        times.append(time.perf_counter() - start)
    return times


def lg_resume(builder: Any, db: str) -> tuple[float, float, int]:
    """A thread failed in unit 5, resumed through a new connection: as ``af_resume``."""
    config = _thread()
    graph, conn = _lg_graph(builder, db)
    _fail_once[0] = True
    try:
        graph.invoke({"records": []}, config, durability="sync")
    except RuntimeError:
        pass
    else:
        raise AssertionError("unit 5 did not fail")
    finally:
        conn.close()
    WORK[0] = 0
    opened = time.perf_counter()
    graph, conn = _lg_graph(builder, db)
    try:
        start = time.perf_counter()
        out = graph.invoke(None, config, durability="sync")
        done = time.perf_counter()
    finally:
        conn.close()
    assert len(out["records"]) == UNITS
    return done - start, done - opened, WORK[0]


# --- DBOS, in a child process ------------------------------------------------------


def dbos_launch(folder: str) -> Callable[[int], int]:
    """DBOS on a SQLite system database in ``folder``; returns the 10-step workflow."""
    from dbos import DBOS

    DBOS(
        config={
            "name": "peers",
            "system_database_url": f"sqlite:///{os.path.join(folder, 'dbos.sqlite')}",
            "application_version": "bench",  # else it hashes the workflows' source
            "log_level": "ERROR",
        }
    )

    def unit(k: int, records: list[str]) -> list[str]:
        return [*records, record(k)]

    step = DBOS.step()(unit)

    def linear(units: int) -> int:
        records: list[str] = []
        for k in range(units):
            records = step(k, records)
        return len(records)

    workflow: Callable[[int], int] = DBOS.workflow()(linear)
    DBOS.launch()
    return workflow


def dbos_runs(workflow: Callable[[int], int], n: int) -> list[float]:
    assert workflow(UNITS) == UNITS
    times = []
    for _ in range(n):
        start = time.perf_counter()
        workflow(UNITS)
        times.append(time.perf_counter() - start)
    return times


def dbos_child(conn: Connection, folder: str) -> None:
    """Serve ``n`` → a list of ``n`` per-run seconds (after one warm-up) until ``0``."""
    from dbos import DBOS

    workflow = dbos_launch(folder)
    try:
        while n := conn.recv():
            conn.send(dbos_runs(workflow, n))
    finally:
        DBOS.destroy()


class Dbos:
    def __init__(self, folder: str) -> None:
        self.conn, theirs = multiprocessing.get_context("spawn").Pipe()
        self.child = multiprocessing.get_context("spawn").Process(
            target=dbos_child, args=(theirs, folder), daemon=True
        )
        self.child.start()

    def runs(self, n: int) -> list[float]:
        self.conn.send(n)
        times: list[float] = self.conn.recv()
        return times

    def close(self) -> None:
        self.conn.send(0)
        self.child.join(60)


# --- every library's syncs, under strace ------------------------------------------

STRACED = ("actorflow phases", "actorflow asks", "LangGraph sync", "LangGraph async", "DBOS")
STRACE_CALLS = {
    "fsync": "fsync",
    "fdatasync": "fdatasync",
    "rename": "renames",
    "renameat": "renames",
    "renameat2": "renames",
    "link": "links",
    "linkat": "links",
}


def strace_child(variant: str, n: int, folder: str) -> None:
    """``--strace-child``: set up ``variant``, one warm-up run, ``n`` runs, nothing else."""
    if variant.startswith("actorflow"):
        workflow = variant.split()[1]
        anyio.run(af_runs, os.path.join(folder, "af"), workflow, Durability.SYNC, n)
    elif variant.startswith("LangGraph"):
        lg_runs(lg_builder(), os.path.join(folder, "lg.db"), variant.split()[1], n)
    else:
        from dbos import DBOS

        dbos_runs(dbos_launch(folder), n)
        DBOS.destroy()


def strace_per_run(variant: str, n: int) -> Counter[str]:
    """Calls per run: the child traced with ``3n`` runs minus with ``n``, over ``2n``."""
    totals = []
    for runs in (n, 3 * n):
        with tempfile.TemporaryDirectory(prefix="af-strace-", dir=os.environ.get("BENCH_DIR")) as d:
            out = os.path.join(d, "strace.txt")
            command = [
                "strace",
                "-f",
                "-c",
                "-o",
                out,
                "-e",
                "trace=" + ",".join(STRACE_CALLS),
                sys.executable,
                __file__,
                f"--strace-child={variant}",
                f"--runs={runs}",
                f"--dir={d}",
            ]
            subprocess.run(command, check=True, timeout=600, capture_output=True)
            counts: Counter[str] = Counter()
            with open(out) as f:
                for line in f:
                    fields = line.split()
                    if fields and fields[-1] in STRACE_CALLS:
                        calls = int(fields[3] if len(fields) == 6 else fields[-2])
                        counts[STRACE_CALLS[fields[-1]]] += calls
            totals.append(counts)
    per_run: Counter[str] = Counter()
    for name in ("fsync", "fdatasync", "renames", "links"):
        per_run[name] = round((totals[1][name] - totals[0][name]) / (2 * n))
    return per_run


def report_strace() -> None:
    rows = []
    for variant in STRACED:
        if variant.startswith("LangGraph") and not _installed("langgraph"):
            continue
        if variant == "DBOS" and not _installed("dbos"):
            continue
        c = strace_per_run(variant, 2 if QUICK else 5)
        syncs = c["fsync"] + c["fdatasync"]
        rows.append(
            [
                variant + (" sync" if variant.startswith("actorflow") else ""),
                str(c["fsync"]),
                str(c["fdatasync"]),
                str(syncs),
                str(c["renames"]),
                str(c["links"]),
            ]
        )
    _table(
        "3b. per sync run, every library, counted by strace -f -c (SQLite's syncs too)",
        ["variant", "fsync", "fdatasync", "syncs", "renames", "links"],
        rows,
    )


# --- rounds -------------------------------------------------------------------------


def _backends() -> list[str]:
    chosen = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--backend=")]
    return chosen or ["asyncio", "trio"]


class Counted(NamedTuple):
    """What the by-caller pass saw of one variant."""

    syncs: float  # per run
    calls: Counter[str]  # in all its runs
    by_caller: Counter[tuple[str, str, str]]  # (when, call, caller) in all its runs
    kb_written: float  # per run


class Bench:
    """Every variant of every shape, their samples, and the turns they take."""

    def __init__(self, tmp: str, only: str) -> None:
        self.tmp = tmp
        self.only = only
        self.samples: dict[str, Samples] = {}
        self.jobs: list[tuple[str, Callable[[], None]]] = []
        self.lg = _installed("langgraph") and _installed("langgraph.checkpoint.sqlite")
        self.dbos: Dbos | None = None
        self.floor_syncs: dict[str, int] = {}
        self.crashed: dict[str, str] = {}
        self.counted: dict[tuple[str, str], Counted] = {}  # by (workflow, backend)

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name.replace(" ", "-").replace(",", ""))

    def add(self, name: str, job: Callable[[Samples], None]) -> None:
        samples = self.samples[name] = Samples()
        self.jobs.append((name, lambda: job(samples)))

    def setup(self) -> None:
        backends = _backends()
        if "1" in self.only:
            # the floor replays the count the by-caller pass finds (measure 3)
            for backend in backends:
                for workflow in WORKFLOWS:
                    anyio.run(self._count_pass, workflow, backend, backend=backend)
            for workflow in WORKFLOWS:
                self.floor_syncs[workflow] = round(self.counted[workflow, backends[0]].syncs)
        builder = lg_builder() if self.lg else None
        modes = [("1", Durability.SYNC, "sync"), ("2", Durability.BATCHED, "async")]
        for key, durability, lg_mode in modes:
            if key not in self.only:
                continue
            if builder is not None:
                self.add(f"LangGraph {lg_mode}", self._lg_job(builder, lg_mode))
            for backend in backends:
                for workflow in WORKFLOWS:
                    name = f"actorflow {workflow} {durability}, {backend}"
                    self.add(name, self._af_job(name, workflow, durability, backend))
        if "1" in self.only:
            for backend in backends:
                for workflow in WORKFLOWS:
                    self.add(f"floor {workflow}, {backend}", self._floor_job(workflow, backend))
        if ("1" in self.only or "2" in self.only) and _installed("dbos"):
            os.makedirs(self.path("dbos"))
            self.dbos = dbos = Dbos(self.path("dbos"))
            self.add("DBOS", lambda s: s.rounds.append(dbos.runs(RUNS)))
        if "6" in self.only:
            if builder is not None:
                self.add(
                    "memory LangGraph",
                    lambda s: s.rounds.append(lg_plain_runs(builder, MEMORY_RUNS)),
                )
            for backend in backends:
                self.add(f"memory actorflow phases, {backend}", self._memory_job(backend))
        if "7" in self.only:
            for backend in backends:
                self.add(f"ask actorflow, {backend}", self._ask_job(backend))
            if _installed("pykka"):
                self.add("ask pykka", lambda s: s.rounds.append(pykka_asks(ASKS)))
            if _installed("autogen_core"):
                self.add("ask autogen-core", lambda s: s.rounds.append(autogen_asks(ASKS)))
        if "5" in self.only:
            if builder is not None:
                self.add("crash LangGraph", self._lg_crash_job(builder))
            for workflow in WORKFLOWS:
                self.crashed[workflow] = source = self.path(f"crashed-{workflow}")
                build_crashed(source, workflow)
                for backend in backends:
                    self.add(
                        f"crash actorflow {workflow}, {backend}", self._crash_job(source, backend)
                    )

    async def _count_pass(self, workflow: str, backend: str) -> None:
        await af_by_caller(self.path(f"count-{workflow}-{backend}"), workflow, COUNTED_RUNS)
        by_caller, TAP.by_caller = TAP.by_caller, None
        assert by_caller is not None
        counts: Counter[str] = Counter()
        for (_, call, _), n in by_caller.items():
            counts[call] += n
        total = sum(counts[n] for n in SYNC_CALLS) / COUNTED_RUNS
        kb = TAP.written / COUNTED_RUNS / 1024
        self.counted[workflow, backend] = Counted(total, counts, by_caller, kb)

    def _lg_job(self, builder: Any, mode: str) -> Callable[[Samples], None]:
        db = self.path(f"lg-{mode}.db")

        def job(s: Samples) -> None:
            s.rounds.append(lg_runs(builder, db, mode, RUNS))

        return job

    def _lg_crash_job(self, builder: Any) -> Callable[[Samples], None]:
        db = self.path("lg-crash.db")

        def job(s: Samples) -> None:
            _resumes(s, lambda: lg_resume(builder, db))

        return job

    def _af_job(
        self, name: str, workflow: str, durability: Durability, backend: str
    ) -> Callable[[Samples], None]:
        path = self.path(name)

        def job(s: Samples) -> None:
            times, syncs = anyio.run(af_runs, path, workflow, durability, RUNS, backend=backend)
            s.rounds.append(times)
            s.counts.append(syncs)

        return job

    def _floor_job(self, workflow: str, backend: str) -> Callable[[Samples], None]:
        folder = self.path(f"floor-{workflow}-{backend}")
        os.makedirs(folder)

        def job(s: Samples) -> None:
            syncs = self.floor_syncs[workflow]
            s.rounds.append(anyio.run(floor_runs, folder, syncs, RUNS, backend=backend))

        return job

    def _memory_job(self, backend: str) -> Callable[[Samples], None]:
        def job(s: Samples) -> None:
            s.rounds.append(anyio.run(af_memory_runs, "phases", MEMORY_RUNS, backend=backend))

        return job

    def _ask_job(self, backend: str) -> Callable[[Samples], None]:
        def job(s: Samples) -> None:
            s.rounds.append(anyio.run(af_asks, ASKS, backend=backend))

        return job

    def _crash_job(self, source: str, backend: str) -> Callable[[Samples], None]:
        scratch = source + "-" + backend

        def job(s: Samples) -> None:
            _resumes(s, lambda: anyio.run(af_resume, source, scratch, backend=backend))

        return job

    def run(self) -> None:
        for r in range(ROUNDS if self.jobs else 0):
            shift = r % len(self.jobs)
            for _, job in self.jobs[shift:] + self.jobs[:shift]:
                gc.collect()
                job()

    def close(self) -> None:
        if self.dbos is not None:
            self.dbos.close()


def _resumes(s: Samples, resume: Callable[[], tuple[float, float, int]]) -> None:
    times = []
    for _ in range(CRASHES):
        seconds, with_open, redone = resume()
        times.append(seconds)
        s.extra.append(with_open)
        s.counts.append(redone)
    s.rounds.append(times)


# --- tables -------------------------------------------------------------------------


def _pct(samples: list[float], p: int) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def _row(cells: list[str], widths: list[int]) -> str:
    first, *rest = cells
    return (
        f"{first:<{widths[0]}}"
        + "".join(f"{c:>{w}}" for c, w in zip(rest, widths[1:], strict=True))
    ).rstrip()


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [
        max(len(r[i]) for r in [header, *rows]) + (0 if i == 0 else 2) for i in range(len(header))
    ]
    print(f"\n{title}")
    print(_row(header, widths))
    for row in rows:
        print(_row(row, widths))


def _ratio(a: Samples, b: Samples | None) -> str:
    """p50 of ``a`` over p50 of ``b``; then the ratio of the two in each round.

    Both took their turns in every round, so the per-round ratios show how far
    the machine's load moved the comparison: their median and range.
    """
    if b is None or not b.rounds:
        return ""
    overall = statistics.median(a.all()) / statistics.median(b.all())
    per_round = [
        statistics.median(x) / statistics.median(y) for x, y in zip(a.rounds, b.rounds, strict=True)
    ]
    low, mid, high = min(per_round), statistics.median(per_round), max(per_round)
    return f"{overall:.2f}x | {mid:.2f} ({low:.2f}-{high:.2f})"


def _spread(s: Samples) -> str:
    p50s = [statistics.median(r) for r in s.rounds]
    return f"{min(p50s) * 1e3:.1f}-{max(p50s) * 1e3:.1f}"


def report(bench: Bench) -> None:
    samples = bench.samples
    backends = _backends()
    header = ["variant", "p50 ms", "p90 ms", "round p50s", "x LangGraph p50 | rounds"]
    for key, lg_mode, title in [
        ("1", "sync", "1. 10-unit linear run, durable after every unit (sync)"),
        ("2", "async", "2. the same, default modes (actorflow batched, LangGraph async)"),
    ]:
        if key not in bench.only:
            continue
        base = samples.get(f"LangGraph {lg_mode}")
        rows = []
        for name, s in samples.items():
            if name.startswith(("crash", "floor", "memory", "ask")) or (
                name.startswith("LangGraph") and name != f"LangGraph {lg_mode}"
            ):
                continue
            if name.startswith("actorflow") and (" sync" in name) != (key == "1"):
                continue
            label = name + (" (its only mode)" if name == "DBOS" and key == "2" else "")
            all_ = s.all()
            rows.append(
                [label, _ms(_pct(all_, 50)), _ms(_pct(all_, 90)), _spread(s), _ratio(s, base)]
            )
        _table(title, header, rows)
    if "1" in bench.only:
        _report_syncs(bench, backends)
        rows = []
        for backend in backends:
            for workflow in WORKFLOWS:
                floor = samples[f"floor {workflow}, {backend}"]
                s = samples[f"actorflow {workflow} sync, {backend}"]
                rows.append(
                    [
                        f"{bench.floor_syncs[workflow]} syncs alone ({workflow}), {backend}",
                        _ms(_pct(floor.all(), 50)),
                        _ms(_pct(floor.all(), 90)),
                        _spread(floor),
                        _ratio(s, floor),
                    ]
                )
        _table(
            "4. the floor: the same count of syncs alone (new 1 KB file + fsync, one "
            "worker-thread trip each)",
            ["floor", "p50 ms", "p90 ms", "round p50s", "actorflow sync / floor | rounds"],
            rows,
        )
    if "5" in bench.only:
        base = samples.get("crash LangGraph")
        rows = []
        for name, s in samples.items():
            if not name.startswith("crash"):
                continue
            all_ = s.all()
            rows.append(
                [
                    name.removeprefix("crash "),
                    _ms(_pct(all_, 50)),
                    _ms(_pct(all_, 90)),
                    _ms(_pct(s.extra, 50)),
                    f"{statistics.median(s.counts):.0f}",
                    _ratio(s, base),
                ]
            )
        _table(
            "5. crash after unit 4 of 10, finish in a fresh runtime / connection (sync): "
            "the resume",
            [
                "variant",
                "p50 ms",
                "p90 ms",
                "open+resume p50",
                "units redone",
                "x LangGraph p50 | rounds",
            ],
            rows,
        )


def _p50(s: Samples) -> float:
    return statistics.median(s.all())


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def report_more(bench: Bench) -> None:
    """Shapes 6 and 7: the run without durability, and one ask."""
    samples = bench.samples
    for key, prefix, base_name, title, unit in [
        (
            "6",
            "memory ",
            "memory LangGraph",
            "6. the run of 1 without durability (actorflow MemoryStore, LangGraph no checkpointer)",
            _ms,
        ),
        ("7", "ask ", "ask pykka", "7. one ask between two agents, each timed (µs)", _us),
    ]:
        if key not in bench.only:
            continue
        base = samples.get(base_name)
        rows = []
        for name, s in samples.items():
            if not name.startswith(prefix) or not s.rounds:
                continue
            all_ = s.all()
            rows.append(
                [
                    name.removeprefix(prefix),
                    unit(_pct(all_, 50)),
                    unit(_pct(all_, 90)),
                    _ratio(s, base),
                    _ratio(s, samples.get("ask autogen-core")) if key == "7" else "",
                ]
            )
        header = ["variant", "p50", "p90", f"x {base_name.removeprefix(prefix)} p50 | rounds"]
        if key == "7":
            header.append("x autogen-core p50 | rounds")
        _table(title, header, [r[: len(header)] for r in rows])


def report_targets(bench: Bench) -> None:
    """Issue 24's targets, units as phases; ratios are p50 over p50, then per round."""
    samples = bench.samples
    rows = []

    def p50_ratio(name: str, base: str) -> str:
        a, b = samples.get(name), samples.get(base)
        return "" if a is None or b is None else _ratio(a, b)

    for backend in _backends():
        sync = f"actorflow phases sync, {backend}"
        if "1" in bench.only:
            rows.append(
                [f"sync, x LangGraph ({backend})", "≤ 0.6", p50_ratio(sync, "LangGraph sync")]
            )
            memory = samples.get(f"memory actorflow phases, {backend}")
            if memory is not None and memory.rounds:
                over = _p50(samples[sync]) - _p50(samples[f"floor phases, {backend}"])
                rows.append(
                    [
                        f"sync minus the floor, ms ({backend})",
                        f"≤ memory + 1 = {_ms(_p50(memory) + 1e-3)}",
                        _ms(over),
                    ]
                )
        if "2" in bench.only:
            batched = f"actorflow phases batched, {backend}"
            rows.append(
                [
                    f"default modes, x LangGraph ({backend})",
                    "≤ 0.4",
                    p50_ratio(batched, "LangGraph async"),
                ]
            )
        if "5" in bench.only:
            crash = f"crash actorflow phases, {backend}"
            rows.append(
                [
                    f"crash, resume x LangGraph's ({backend})",
                    "≤ 0.6",
                    p50_ratio(crash, "crash LangGraph"),
                ]
            )
        if "6" in bench.only:
            rows.append(
                [
                    f"no durability, x LangGraph ({backend})",
                    "≤ 0.5",
                    p50_ratio(f"memory actorflow phases, {backend}", "memory LangGraph"),
                ]
            )
        if "7" in bench.only:
            ask = f"ask actorflow, {backend}"
            rows.append([f"ask, x pykka ({backend})", "≤ 0.5", p50_ratio(ask, "ask pykka")])
            rows.append(
                [f"ask, x autogen-core ({backend})", "≤ 0.1", p50_ratio(ask, "ask autogen-core")]
            )
    if "1" in bench.only:
        syncs = bench.counted["phases", _backends()[0]].syncs
        rows.append(["fsyncs+fdatasyncs per sync run", "≤ 14", f"{syncs:.0f}"])
    if rows:
        _table("targets (issue 24), units as phases", ["measure", "target", "today | rounds"], rows)


def _report_syncs(bench: Bench, backends: list[str]) -> None:
    rows = []
    for backend in backends:
        for workflow in WORKFLOWS:
            total, counts, _, kb = bench.counted[workflow, backend]
            timed = bench.samples[f"actorflow {workflow} sync, {backend}"].counts
            n = COUNTED_RUNS
            rows.append(
                [
                    f"actorflow {workflow} sync, {backend}",
                    f"{counts['fsync'] / n:.1f}",
                    f"{counts['fdatasync'] / n:.1f}",
                    f"{total:.1f}",
                    f"{min(timed):.1f}-{max(timed):.1f}",
                    f"{counts['rename'] / n + counts['replace'] / n:.1f}",
                    f"{counts['link'] / n:.1f}",
                    f"{kb:.0f}",
                ]
            )
    _table(
        f"3. syncs per actorflow sync run (os calls counted in-process; {COUNTED_RUNS} runs "
        "attributed, and the timed runs' totals)",
        ["variant", "fsync", "fdatasync", "syncs", "timed runs", "renames", "links", "KB written"],
        rows,
    )
    for workflow in WORKFLOWS:
        by_caller = bench.counted[workflow, backends[0]].by_caller
        rows = [
            [f"{count / COUNTED_RUNS:.1f}", stage, call, where]
            for (stage, call, where), count in sorted(
                by_caller.items(), key=lambda kv: (kv[0][0] != "during run()", -kv[1], kv[0])
            )
        ]
        _table(
            f"3. where they come from, actorflow {workflow} sync ({backends[0]}), per run",
            ["per run", "when", "call", "caller (innermost first)"],
            rows,
        )


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _arg(name: str, default: str) -> str:
    return next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), default)


def main() -> None:
    if child := _arg("strace-child", ""):
        strace_child(child, int(_arg("runs", "1")), _arg("dir", ""))
        return
    only = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), "12567")
    names = ("langgraph", "langgraph-checkpoint-sqlite", "dbos", "pykka", "autogen-core")
    peers = ", ".join(f"{name} {_version(name)}" for name in names)
    print(
        f"python {sys.version.split()[0]}, anyio {_version('anyio')}, trio {_version('trio')}, "
        f"{peers}; SQLite {sqlite3.sqlite_version}; {os.cpu_count()} cpus, {cpu_model()}"
    )
    if not _installed("langgraph") or not _installed("dbos"):
        print("peers missing: pip install -e '.[bench]' (their rows and ratios are left out)")
    TAP.install()
    started = time.perf_counter()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="af-peers-", dir=os.environ.get("BENCH_DIR")) as tmp:
        bench = Bench(tmp, only)
        try:
            bench.setup()
            bench.run()
        finally:
            bench.close()
            TAP.uninstall()
        report(bench)
        report_more(bench)
        if "--strace" in sys.argv:
            report_strace()
        report_targets(bench)
    print(
        f"\n{ROUNDS} rounds of {RUNS} runs per variant ({CRASHES} crashes); "
        f"{time.perf_counter() - started:.0f} s, load average {load:.1f} → {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
