"""Workflow benchmark: what durability costs a run, recovery latency, many runs at once.

Run: ``.venv/bin/python benchmarks/workflow.py [--quick] [--only=1234]
[--backend=asyncio|trio]`` (the full run takes about 90 s). Prints one table per
backend (asyncio, trio). Every durable figure stands next to a baseline
measured in the same run: the same orchestration done with plain actors and
``ask`` from the actor runtime (no store, no records), or one bare fsync.

1. Checkpointing cost: a 10-phase workflow, 8 specialists, ~1 ms of CPU work
   per step, on a FileStore with ``batched`` durability, against plain actors;
   and the same with ``record_messages=False`` (what keeping each step's
   message in its record costs), interleaved.
2. Durable short run: 10 linear steps each returning ~1 KB, p50 per run in
   ``sync``, ``batched`` and ``phase`` modes, against plain actors, one fsync and
   the floor: the syncs a ``sync`` run makes (counted in a pass of its own),
   each one fsync through a worker thread.
3. Recovery: a run crashed (``CrashingStore`` over a FileStore) with 1000 log
   records after its newest snapshot and 4 agents holding 1000 tasks in all;
   time from ``recover()`` called to the first live step's handler.
4. 1,000 concurrent small runs in one runtime: runs/s and memory per live run.
5. The flush delay of ``batched`` mode (the loss window), swept: durable
   appends per run of benchmark 1's shape and runs/s of benchmark 4's, each
   against no bound (``flush_delay=inf``, the rule alone), interleaved.
"""

from __future__ import annotations

import gc
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec
import structlog.testing
from _machine import cpu_model

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.runtime import CheckpointTriggers, Durability, RuntimeConfig
from actorflow.storage import FileStore, LogRecord, MemoryStore, OSFileSystem
from actorflow.testing import CrashingStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from actorflow.runtime import ActorRef

QUICK = "--quick" in sys.argv
PHASES, TEAM, ROUNDS = 10, 8, 2  # benchmark 1: 10 phases x 2 rounds x 8 specialists
STEPS_1 = PHASES * ROUNDS * TEAM
REPS_1 = 3 if QUICK else 9
RUNS_2 = 15 if QUICK else 50
SAMPLES_3 = 8 if QUICK else 30
RUNS_4 = 200 if QUICK else 1000
REPS_5 = 2 if QUICK else 5
DELAYS_5 = (0.0, 0.005, 0.02, 0.05, 0.1)
RECOVERY_STEPS, RECOVERY_AGENTS, TASKS = 1000, 4, 1000

_burn_n = 1  # calibrated by calibrate() so that burn() takes ~1 ms
BURNED = [0.0]  # seconds spent inside burn() since the last reset


def burn(seed: int) -> int:
    """About 1 ms of CPU-bound work (the same in every variant)."""
    start = time.perf_counter()
    acc = seed
    for i in range(_burn_n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    BURNED[0] += time.perf_counter() - start
    return acc


def calibrate() -> float:
    """Set ``_burn_n`` so ``burn()`` takes ~1 ms; return the median time it takes."""
    global _burn_n
    _burn_n = 10_000
    best = min(_time_burn() for _ in range(5))
    _burn_n = int(_burn_n * 0.001 / best)
    return statistics.median(_time_burn() for _ in range(50))


def _time_burn() -> float:
    start = time.perf_counter()
    burn(1)
    return time.perf_counter() - start


# --- 1. checkpointing cost: 10 phases, 8 specialists --------------------------


class Job(Request["Out"], frozen=True):
    phase: int
    item: int


class Out(msgspec.Struct, frozen=True):
    phase: int
    item: int
    value: int


class Tally(msgspec.Struct):
    done: int = 0


class Worker(Specialist):
    state: Tally

    @handler
    async def work(self, job: Job) -> Out:
        self.state.done += 1
        return Out(job.phase, job.item, burn(job.phase * 1000 + job.item))


class TenPhases(Orchestrator):
    @phase
    async def stage(self, ctx: RunContext, k: int, team: list[Any]) -> int:
        total = 0
        for r in range(ROUNDS):
            outs: list[Out] = await ctx.gather(
                *(ctx.ask(ref, Job(k, r * TEAM + i)) for i, ref in enumerate(team))
            )
            total += sum(o.value & 0xFF for o in outs)
        return total

    async def run(self, ctx: RunContext, phases: int) -> int:
        team = [await ctx.spawn(Worker, name=f"worker-{i}") for i in range(TEAM)]
        total = 0
        for k in range(phases):
            total += await self.stage(ctx, k, team)
        return total


async def plain_ten_phases(runtime: Runtime, team: list[ActorRef[Worker]]) -> int:
    """The same orchestration with plain actors and ask: nothing recorded."""
    total = 0
    for k in range(PHASES):
        for r in range(ROUNDS):
            outs: list[Any] = [None] * TEAM

            async def one(
                i: int, ref: ActorRef[Worker], r: int = r, k: int = k, outs: list[Any] = outs
            ) -> None:
                outs[i] = await ref.ask(Job(k, r * TEAM + i))

            async with anyio.create_task_group() as tg:
                for i, ref in enumerate(team):
                    tg.start_soon(one, i, ref)
            total += sum(o.value & 0xFF for o in outs)
    return total


class _AppendTap(FileStore):
    """A FileStore that keeps the batches it appends, to replay them alone (the floor)."""

    batches: list[list[LogRecord]]

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        self.batches.append(list(records))
        return await super().append(run_id, records)


async def _appends_alone(store: _AppendTap, batches: list[list[LogRecord]], n: int) -> float:
    """Seconds to append ``batches`` one after another to a fresh run: a run's log alone."""
    manifest = await store.read_run("b1-template")
    run_id = f"b1-floor-{n}"
    await store.create_run(msgspec.structs.replace(manifest, run_id=run_id, snapshots=()))
    start = time.perf_counter()
    for batch in batches:
        await store.append(run_id, batch)
    return time.perf_counter() - start


async def bench_checkpointing(tmp: str) -> list[Row]:
    plain: list[tuple[float, float]] = []
    durable: list[tuple[float, float]] = []
    memory: list[tuple[float, float]] = []
    phased: list[tuple[float, float]] = []
    bare: list[tuple[float, float]] = []  # FileStore batched, messages not kept
    bare_m: list[tuple[float, float]] = []  # MemoryStore, messages not kept
    floor: list[float] = []
    config = RuntimeConfig(durability=Durability.BATCHED, retention=None)
    unkept = msgspec.structs.replace(config, record_messages=False)
    async with Runtime() as runtime:
        team = [await runtime.spawn(Worker, name=f"worker-{i}") for i in range(TEAM)]
        expected = await plain_ten_phases(runtime, team)  # warm-up
    store = _AppendTap(os.path.join(tmp, "b1"))
    store.batches = []
    async with (
        Runtime(store=store, config=config) as durable_rt,
        Runtime(store=MemoryStore(), config=config) as memory_rt,
        Runtime(
            store=FileStore(os.path.join(tmp, "b1-phase")),
            config=RuntimeConfig(durability=Durability.PHASE, retention=None),
        ) as phase_rt,
        Runtime() as plain_rt,
        Runtime(store=FileStore(os.path.join(tmp, "b1-bare")), config=unkept) as bare_rt,
        Runtime(store=MemoryStore(), config=unkept) as bare_m_rt,
    ):
        team = [await plain_rt.spawn(Worker, name=f"worker-{i}") for i in range(TEAM)]
        assert await durable_rt.run(TenPhases, PHASES, run_id="b1-template") == expected
        assert await phase_rt.run(TenPhases, PHASES) == expected  # warm-up
        assert await bare_rt.run(TenPhases, PHASES) == expected  # warm-up
        batches, store.batches = store.batches, []
        for n in range(REPS_1):  # interleaved so load changes hit every variant alike
            plain.append(await _timed_work(lambda: plain_ten_phases(plain_rt, team)))
            durable.append(await _timed_work(lambda: durable_rt.run(TenPhases, PHASES)))
            memory.append(await _timed_work(lambda: memory_rt.run(TenPhases, PHASES)))
            phased.append(await _timed_work(lambda: phase_rt.run(TenPhases, PHASES)))
            bare.append(await _timed_work(lambda: bare_rt.run(TenPhases, PHASES)))
            bare_m.append(await _timed_work(lambda: bare_m_rt.run(TenPhases, PHASES)))
            floor.append(await _appends_alone(store, batches, n))
    # The work itself is the same in every variant, but other processes on the
    # machine stretch it by different amounts from run to run: the time added
    # is measured outside burn() (wall - time inside burn), paired with the
    # plain run measured just before.
    p, d, m = (statistics.median(x[0] for x in v) for v in (plain, durable, memory))
    f = statistics.median(floor)
    added_d, added_m = _paired(durable, plain, 1), _paired(memory, plain, 1)
    added_p = _paired(phased, plain, 1)
    added_b, added_bm = _paired(bare, plain, 1), _paired(bare_m, plain, 1)
    per_step = 1e6 / STEPS_1
    return [
        Row(f"1 run, {STEPS_1} steps, plain actors ms", p * 1e3, None, "ms"),
        Row("1 run, FileStore batched ms", d * 1e3, p * 1e3, "ms"),
        Row("1 µs added per step (≤ 50)", added_d * per_step, None, "µs"),
        Row("1 wall-time ratio (≤ 1.10)", (p + added_d) / p, None, "x"),
        Row("1 wall-time ratio, raw (work not removed)", _paired_ratio(durable, plain), None, "x"),
        Row("1 run, MemoryStore batched ms", m * 1e3, p * 1e3, "ms"),
        Row("1 µs added per step, MemoryStore", added_m * per_step, None, "µs"),
        Row("1 wall-time ratio, MemoryStore", (p + added_m) / p, None, "x"),
        Row("1 µs added per step, FileStore phase", added_p * per_step, None, "µs"),
        Row("1 µs added per step, messages not kept: FileStore", added_b * per_step, None, "µs"),
        Row("1 µs added per step, messages not kept: MemoryStore", added_bm * per_step, None, "µs"),
        Row("1 messages kept, µs per step: FileStore", (added_d - added_b) * per_step, None, "µs"),
        Row(
            "1 messages kept, µs per step: MemoryStore", (added_m - added_bm) * per_step, None, "µs"
        ),
        Row("1 wall-time ratio, FileStore phase", (p + added_p) / p, None, "x"),
        Row(f"1 durable appends per run (the rule's {len(batches)})", len(batches), None, "n"),
        Row("1 floor: those appends alone, µs per step", f * per_step, None, "µs"),
        Row("1 floor + engine (MemoryStore), µs per step", (f + added_m) * per_step, None, "µs"),
        Row("1 µs added per step / (floor + engine)", added_d / (f + added_m), None, "x"),
    ]


def _paired(a: list[tuple[float, float]], b: list[tuple[float, float]], i: int) -> float:
    return statistics.median(x[i] - y[i] for x, y in zip(a, b, strict=True))


def _paired_ratio(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    return statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))


# --- 2. durable short run: 10 linear steps of ~1 KB ---------------------------


class Item(Request["Page"], frozen=True):
    n: int


class Page(msgspec.Struct, frozen=True):
    n: int
    text: str


class Writer(Specialist):
    @handler
    async def write(self, item: Item) -> Page:
        return Page(item.n, (f"{item.n:04d}" * 256)[:1000])


class Linear(Orchestrator):
    async def run(self, ctx: RunContext, steps: int) -> int:
        writer = await ctx.spawn(Writer, name="writer")
        size = 0
        for n in range(steps):
            page: Page = await ctx.ask(writer, Item(n))
            size += len(page.text)
        return size


async def plain_linear(ref: ActorRef[Writer]) -> int:
    size = 0
    for n in range(10):
        page = await ref.ask(Item(n))
        size += len(page.text)
    return size


def _fsync_once(path: str) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = time.perf_counter()
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)


class _CountingFS(OSFileSystem):
    """Counts the file store's syncs: file contents, data only, and folders."""

    syncs = 0

    def fsync(self, handle: int) -> None:
        _CountingFS.syncs += 1
        super().fsync(handle)

    def sync_data(self, handle: int) -> None:
        _CountingFS.syncs += 1
        super().sync_data(handle)

    def fsync_dir(self, path: str) -> None:
        _CountingFS.syncs += 1
        super().fsync_dir(path)


async def _syncs_per_sync_run(path: str) -> int:
    """The syncs of one ``sync`` run of ``Linear``, retention off (it runs after)."""
    config = RuntimeConfig(durability=Durability.SYNC, retention=None)
    async with Runtime(store=FileStore(path, fs=_CountingFS()), config=config) as rt:
        await rt.run(Linear, 10)
        before = _CountingFS.syncs
        await rt.run(Linear, 10)
        return _CountingFS.syncs - before


async def bench_short_run(tmp: str) -> list[Row]:
    syncs = await _syncs_per_sync_run(os.path.join(tmp, "b2-count"))
    probe = os.path.join(tmp, "fsync-probe")
    fsyncs = [_fsync_once(probe) for _ in range(100)]
    fsync = statistics.median(fsyncs)
    hops = [await _timed(lambda: anyio.to_thread.run_sync(_fsync_once, probe)) for _ in range(100)]
    hop = statistics.median(hops)
    async with Runtime() as runtime:
        ref = await runtime.spawn(Writer, name="writer")
        for _ in range(20):
            await plain_linear(ref)
        plain = statistics.median([await _timed(lambda: plain_linear(ref)) for _ in range(200)])
    rows = [
        Row("2 one 4 KB write+fsync ms", fsync * 1e3, None, "ms"),
        Row("2 same, via a worker thread ms", hop * 1e3, None, "ms"),
        Row(f"2 floor: the run's {syncs} syncs, worker thread ms", syncs * hop * 1e3, None, "ms"),
        Row("2 10 steps, plain actors p50 ms", plain * 1e3, None, "ms"),
    ]
    variants: list[tuple[str, Callable[[str], Any], RuntimeConfig]] = [
        (str(mode), FileStore, RuntimeConfig(durability=mode))
        for mode in (Durability.SYNC, Durability.BATCHED, Durability.PHASE)
    ]
    variants.append(
        (
            "sync, retention off",
            FileStore,
            RuntimeConfig(durability=Durability.SYNC, retention=None),
        )
    )
    variants.append(
        (
            "sync, MemoryStore",
            lambda _: MemoryStore(),
            RuntimeConfig(durability=Durability.SYNC, retention=None),
        )
    )
    for n, (label, store, config) in enumerate(variants):
        samples = []
        async with Runtime(store=store(os.path.join(tmp, f"b2-{n}")), config=config) as rt:
            for _ in range(5):
                await rt.run(Linear, 10)
            for _ in range(RUNS_2):
                samples.append(await _timed(lambda rt=rt: rt.run(Linear, 10)))  # type: ignore[misc]
        p50, p95 = _pct(samples, 50), _pct(samples, 95)
        target = " (≤ 6)" if n == 0 else ""
        rows.append(Row(f"2 {label} p50 ms{target}", p50 * 1e3, plain * 1e3, "ms"))
        if n < 3:
            rows.append(Row(f"2 {label} p95 ms", p95 * 1e3, plain * 1e3, "ms"))
        if n == 0:
            ratio = p50 / (syncs * hop)
            rows.append(Row("2 sync p50 / the floor (target ≤ 1.2)", ratio, None, "x"))
    return rows


# --- 3. recovery: 1000 records to replay, 1000-task state ----------------------


class Task(msgspec.Struct):
    id: str
    status: str
    result: str
    started: float
    finished: float
    duration: float


class Ledger(msgspec.Struct):
    tasks: list[Task] = msgspec.field(default_factory=list)


class Work(Request["Note"], frozen=True):
    i: int
    change: bool


class Note(msgspec.Struct, frozen=True):
    i: int
    text: str


LIVE: list[float] = []  # perf_counter of every handler run: replayed steps never run


class Keeper(Specialist):
    state: Ledger

    @handler
    async def handle(self, work: Work) -> Note:
        LIVE.append(time.perf_counter())
        if work.change:
            task = self.state.tasks[work.i % len(self.state.tasks)]
            task.status = f"revised-{work.i}"
        return Note(work.i, f"note {work.i} " * 60)  # ~600 bytes


def ledger(agent: int) -> Ledger:
    per = TASKS // RECOVERY_AGENTS
    return Ledger(
        [
            Task(
                f"task-{agent}-{n}",
                "done",
                f"result of task {n} of agent {agent}: " + "evidence " * 12,
                1.7e9 + n,
                1.7e9 + n + 0.5,
                0.5,
            )
            for n in range(per)
        ]
    )


class LongRun(Orchestrator):
    @phase
    async def work(self, ctx: RunContext, team: list[Any], rounds: int) -> int:
        count = 0
        for r in range(rounds):
            # each agent's state changes on every 10th of its steps, staggered:
            # one change every 10 steps of the run
            notes: list[Note] = await ctx.gather(
                *(
                    ctx.ask(ref, Work(r * len(team) + a, (r + a * 3) % 10 == 0))
                    for a, ref in enumerate(team)
                )
            )
            count += len(notes)
        return count

    async def run(self, ctx: RunContext, rounds: int) -> int:
        team = [
            await ctx.spawn(Keeper, name=f"keeper-{a}", state=ledger(a))
            for a in range(RECOVERY_AGENTS)
        ]
        return await self.work(ctx, team, rounds)


RECOVERY_CONFIG = RuntimeConfig(
    # no snapshot inside the phase: all 1000 records after the phase-start one replay
    triggers=CheckpointTriggers(every_steps=None, every_seconds=None),
    retention=None,
)


async def build_crashed(path: str) -> int:
    """Crash one run 1000 records after its newest snapshot; return its total step count."""
    inner = FileStore(path)
    spawns = RECOVERY_AGENTS
    crashing = CrashingStore(inner, crash_after=spawns + RECOVERY_STEPS)
    rounds = RECOVERY_STEPS // RECOVERY_AGENTS + 2
    # the simulated crash makes the runtime warn (lease_release_failed): expected here
    with structlog.testing.capture_logs():
        async with Runtime(store=crashing, config=RECOVERY_CONFIG) as runtime:
            handle = await runtime.start(LongRun, rounds, run_id="long-run")
            await crashing.crashed.wait()
            handle.cancel()
            await handle.wait()
    await inner.aclose()
    return rounds * RECOVERY_AGENTS


async def bench_recovery(tmp: str) -> list[Row]:
    source = os.path.join(tmp, "b3-source")
    total_steps = await build_crashed(source)
    first: list[float] = []
    whole: list[float] = []
    replayed = 0
    for n in range(SAMPLES_3 + 2):
        path = os.path.join(tmp, f"b3-{n}")
        shutil.copytree(source, path)
        async with Runtime(store=FileStore(path), config=RECOVERY_CONFIG) as runtime:
            LIVE.clear()
            gc.collect()
            start = time.perf_counter()
            results = await runtime.recover()
            done = time.perf_counter()
            replayed = runtime.handle("long-run").replayed_steps
        assert results == {"long-run": total_steps}, results
        if n >= 2:  # the first two warm imports and caches
            first.append(LIVE[0] - start)
            whole.append(done - start)
        shutil.rmtree(path)
    return [
        Row(f"3 records replayed (≥ {RECOVERY_STEPS})", replayed, None, "n"),
        Row("3 recover() → first live step p50 ms", _pct(first, 50) * 1e3, None, "ms"),
        Row("3 recover() → first live step p95 (≤ 25)", _pct(first, 95) * 1e3, None, "ms"),
        Row("3 recover() to run completed p50 ms", _pct(whole, 50) * 1e3, None, "ms"),
    ]


# --- 4. 1,000 concurrent small runs ---------------------------------------------


class Ask(Request["Answer"], frozen=True):
    text: str


class Answer(msgspec.Struct, frozen=True):
    text: str
    confidence: float


class Gate:
    """Holds ``expected`` handlers inside their step until ``opened``."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.arrived = 0
        self.all_in = anyio.Event()
        self.opened = anyio.Event()


GATE: Gate | None = None


class Helper(Specialist):
    @handler
    async def answer(self, q: Ask) -> Answer:
        gate = GATE
        if gate is not None:
            gate.arrived += 1
            if gate.arrived == gate.expected:
                gate.all_in.set()
            await gate.opened.wait()
        return Answer(q.text.upper(), 0.9)


class Small(Orchestrator):
    @phase
    async def answer(self, ctx: RunContext, text: str) -> list[Answer]:
        helper = await ctx.spawn(Helper, name="helper")
        answers: list[Answer] = await ctx.gather(
            ctx.ask(helper, Ask(text)), ctx.ask(helper, Ask(text + "!"))
        )
        await ctx.decide("accept", rationale="two answers", confidence=0.9)
        return answers

    async def run(self, ctx: RunContext, text: str) -> int:
        answers = await self.answer(ctx, text)
        return len(answers)


async def many_runs(runtime: Runtime, n: int) -> float:
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(runtime.run, Small, f"question {i}")
    return n / (time.perf_counter() - start)


async def plain_many(n: int) -> float:
    async def one(runtime: Runtime, i: int) -> None:
        ref = await runtime.spawn(Helper, name=f"helper-{i}")
        async with anyio.create_task_group() as tg:
            tg.start_soon(ref.ask, Ask(f"q{i}"))
            tg.start_soon(ref.ask, Ask(f"q{i}!"))
        await runtime.stop(ref)

    async with Runtime() as runtime:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, runtime, i)
        return n / (time.perf_counter() - start)


async def memory_per_run(tmp: str, n: int) -> float:
    """Traced bytes held per live run while ``n`` runs wait inside an agent's step."""
    global GATE
    config = RuntimeConfig(retention=None)
    async with Runtime(store=FileStore(os.path.join(tmp, "b4-mem")), config=config) as rt:
        await rt.run(Small, "warm-up")
        GATE = gate = Gate(n)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        handles = []
        for i in range(n):
            handles.append(await rt.start(Small, f"question {i}"))
        await gate.all_in.wait()
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        gate.opened.set()
        GATE = None
        for h in handles:
            await h.result()
    return used / n


async def bench_many(tmp: str) -> list[Row]:
    plain = await plain_many(RUNS_4)
    rows = [Row(f"4 {RUNS_4} runs, plain actors runs/s", plain, None, "rate")]
    variants: list[tuple[str, Callable[[], Any], RuntimeConfig]] = [
        ("FileStore, defaults", lambda: FileStore(os.path.join(tmp, "b4")), RuntimeConfig()),
        (
            "FileStore, retention off",
            lambda: FileStore(os.path.join(tmp, "b4-noret")),
            RuntimeConfig(retention=None),
        ),
        ("MemoryStore, retention off", MemoryStore, RuntimeConfig(retention=None)),
    ]
    for label, store, config in variants:
        async with Runtime(store=store(), config=config) as rt:
            await rt.run(Small, "warm-up")
            rate = await many_runs(rt, RUNS_4)
        rows.append(Row(f"4 {RUNS_4} runs, {label} runs/s", rate, plain, "rate"))
    rows.append(
        Row("4 bytes per live run (tracemalloc)", await memory_per_run(tmp, 200), None, "B")
    )
    return rows


# --- 5. the flush delay ---------------------------------------------------------------


async def bench_flush_delay(tmp: str) -> list[Row]:
    """Appends per run (benchmark 1's shape) and runs/s (4's) per delay, against no bound."""
    delays = (math.inf, *DELAYS_5)
    appends: dict[float, list[float]] = {d: [] for d in delays}
    wall: dict[float, list[float]] = {d: [] for d in delays}
    rates: dict[float, list[float]] = {d: [] for d in delays}
    for rep in range(REPS_5):  # interleaved so load changes hit every delay alike
        for delay in delays:
            config = RuntimeConfig(flush_delay=delay, retention=None)
            store = _AppendTap(os.path.join(tmp, f"b5-{rep}-{delay}"))
            store.batches = []
            async with Runtime(store=store, config=config) as rt:
                start = time.perf_counter()
                await rt.run(TenPhases, PHASES)
                wall[delay].append(time.perf_counter() - start)
            appends[delay].append(len(store.batches))
            async with Runtime(
                store=FileStore(os.path.join(tmp, f"b5-many-{rep}-{delay}")),
                config=RuntimeConfig(flush_delay=delay),
            ) as rt:
                await rt.run(Small, "warm-up")
                rates[delay].append(await many_runs(rt, RUNS_4))
    a0, w0, r0 = (statistics.median(x[math.inf]) for x in (appends, wall, rates))
    rows = [
        Row("5 no bound: appends per run (bench 1 shape)", a0, None, "n"),
        Row("5 no bound: ms per run (bench 1 shape)", w0 * 1e3, None, "ms"),
        Row(f"5 no bound: {RUNS_4} runs, runs/s", r0, None, "rate"),
    ]
    for delay in DELAYS_5:
        ms = f"{delay * 1e3:g} ms"
        rows += [
            Row(f"5 delay {ms}: appends per run", statistics.median(appends[delay]), a0, "n"),
            Row(f"5 delay {ms}: ms per run", statistics.median(wall[delay]) * 1e3, w0 * 1e3, "ms"),
            Row(f"5 delay {ms}: {RUNS_4} runs/s", statistics.median(rates[delay]), r0, "rate"),
        ]
    return rows


# --- table --------------------------------------------------------------------------


class Row(msgspec.Struct):
    label: str
    value: float
    baseline: float | None
    unit: str


async def _timed_work(fn: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Wall seconds of ``fn()``, and the part of them spent outside ``burn()``."""
    BURNED[0] = 0.0
    start = time.perf_counter()
    await fn()
    wall = time.perf_counter() - start
    return wall, wall - BURNED[0]


async def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


def _pct(samples: list[float], p: int) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run_backend(only: str | None) -> list[Row]:
    rows: list[Row] = []
    benches: list[tuple[str, Callable[[str], Awaitable[list[Row]]]]] = [
        ("1", bench_checkpointing),
        ("2", bench_short_run),
        ("3", bench_recovery),
        ("4", bench_many),
        ("5", bench_flush_delay),
    ]
    with tempfile.TemporaryDirectory(prefix="af-wf-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        for key, bench in benches:
            if only is None or key in only:
                rows.extend(await bench(tmp))
    return rows


def main() -> None:
    only = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), None)
    backends = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--backend=")]
    burn_s = calibrate()
    print(
        f"python {sys.version.split()[0]}, anyio {_version('anyio')}, trio {_version('trio')}; "
        f"{os.cpu_count()} cpus, {cpu_model()}; burn() = {burn_s * 1e3:.3f} ms"
    )
    for backend in backends or ["asyncio", "trio"]:
        started = time.perf_counter()
        rows = anyio.run(run_backend, only, backend=backend)
        load = os.getloadavg()[0]
        print(f"\n{backend} ({time.perf_counter() - started:.0f} s, load average {load:.1f})")
        print(f"{'measure':44} {'value':>12} {'baseline':>12} {'ratio':>8}")
        for row in rows:
            base = "" if row.baseline is None else f"{row.baseline:12,.2f}"
            ratio = ""
            if row.baseline:
                # rates: higher is better; times: print how many times the baseline
                ratio = f"{row.value / row.baseline:7.2f}x"
            digits = 0 if row.unit in ("rate", "B", "n") else 2
            print(f"{row.label:44} {row.value:12,.{digits}f} {base:>12} {ratio:>8}".rstrip())


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
