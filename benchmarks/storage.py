"""Storage benchmark: state capture, durable writes, reads, log appends, checkpoint writes.

Run: ``python benchmarks/storage.py [--quick]``. Prints tables; figures go to
benchmarks/RESULTS.md ("Storage"). The baseline, measured in the same run,
is the usual approach: ``json.dumps`` + gzip-6 + sha256 + a plain durable write
(write, fsync, rename, folder fsync, like ours).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
from _machine import cpu_model

from actorflow.storage import (
    Codec,
    EventRecord,
    FileStore,
    LogWriter,
    PhaseEndRecord,
    RunManifest,
    Snapshot,
    decode_state,
    encode_state,
)
from actorflow.storage.file._threads import run_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable

WORDS = [
    "agent",
    "plan",
    "research",
    "draft",
    "review",
    "score",
    "summary",
    "source",
    "claim",
    "evidence",
    "result",
    "task",
    "phase",
    "retry",
    "model",
    "answer",
    "check",
    "citation",
    "finding",
    "table",
    "figure",
    "note",
]


class Task(msgspec.Struct):
    id: str
    status: str
    result: str
    started: float
    finished: float
    duration: float


class TaskState(msgspec.Struct):
    tasks: list[Task]


class BlobState(msgspec.Struct):
    notes: list[str]


def text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(WORDS) if rng.random() > 0.1 else f"{rng.random():.6f}"
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:size]


def thousand_tasks(rng: random.Random) -> TaskState:
    now = time.time()
    return TaskState(
        tasks=[
            Task(
                id=f"task-{i:04d}",
                status=rng.choice(["done", "failed", "running"]),
                result=text(rng, 200),
                started=now + i,
                finished=now + i + 1.5,
                duration=rng.random() * 10,
            )
            for i in range(1000)
        ]
    )


def sized(rng: random.Random, size: int) -> BlobState:
    chunk = 1000
    return BlobState(notes=[text(rng, chunk) for _ in range(max(1, size // (chunk + 3)))])


def pct(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def atimed(fn: Callable[[int], Any], n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        await fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def baseline_write(folder: str, name: str, value: Any) -> int:
    data = gzip.compress(json.dumps(value).encode(), compresslevel=6)
    digest = hashlib.sha256(data).digest()
    temp = os.path.join(folder, f".{name}.tmp")
    with open(temp, "wb") as f:
        f.write(digest + data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(temp, os.path.join(folder, name))
    fd = os.open(folder, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return len(data) + 32


def baseline_read(folder: str, name: str) -> Any:
    with open(os.path.join(folder, name), "rb") as f:
        raw = f.read()
    if hashlib.sha256(raw[32:]).digest() != raw[:32]:
        raise ValueError("checksum")
    return json.loads(gzip.decompress(raw[32:]))


async def bench_state(label: str, state: Any, tmp: str, n: int) -> dict[str, Any]:
    store = FileStore(os.path.join(tmp, "store"))
    await store.create_run(RunManifest(run_id=label, workflow="b", input=b"", input_hash=""))
    raw = encode_state(state)
    encode = timed(lambda: encode_state(state), n)
    refs: list[str] = []

    async def write(i: int) -> None:
        refs.append(await store.put_blob(label, raw + i.to_bytes(4, "big")))

    writes = await atimed(write, n)
    refs_iter = iter(refs)

    async def read(_i: int) -> None:
        data = await store.get_blob(label, next(refs_iter))
        decode_state(data[:-4], type(state))

    reads = await atimed(read, n)
    stored = len(await anyio.Path(tmp, "store", "runs", label, "blobs", refs[0]).read_bytes())
    builtins = msgspec.to_builtins(state)
    folder = os.path.join(tmp, "baseline")
    os.makedirs(folder, exist_ok=True)
    base_w = timed(lambda: baseline_write(folder, label, builtins), n)
    base_size = len(await anyio.Path(folder, label).read_bytes())
    base_r = timed(lambda: baseline_read(folder, label), n)
    await store.aclose()
    return {
        "label": label,
        "raw": len(raw),
        "encode": pct(encode),
        "write": pct(writes),
        "read": pct(reads),
        "stored": stored,
        "base_write": pct(base_w),
        "base_read": pct(base_r),
        "base_size": base_size,
    }


def state_table(rows: list[dict[str, Any]], codec: str) -> None:
    print(f"\nState capture and storage (FileStore, codec {codec}; ms p50/p95)")
    head = (
        f"{'state':<11}{'raw':>9}{'encode':>14}{'durable write':>16}{'read+verify':>14}"
        f"{'stored':>9}{'%raw':>6}{'MB/s w':>8}{'MB/s r':>8} | {'json+gz write':>14}"
        f"{'read':>12}{'size':>9}{'write x':>8}{'read x':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        mb = r["raw"] / 1e6
        w = r["encode"][0] + r["write"][0]
        print(
            f"{r['label']:<11}{r['raw']:>9}"
            f"{r['encode'][0]:>7.3f}/{r['encode'][1]:<6.3f}"
            f"{r['write'][0]:>8.2f}/{r['write'][1]:<7.2f}"
            f"{r['read'][0]:>7.2f}/{r['read'][1]:<6.2f}"
            f"{r['stored']:>9}{100 * r['stored'] / r['raw']:>5.0f}%"
            f"{mb / (w / 1000):>8.0f}{mb / (r['read'][0] / 1000):>8.0f} | "
            f"{r['base_write'][0]:>7.2f}/{r['base_write'][1]:<6.2f}"
            f"{r['base_read'][0]:>6.2f}/{r['base_read'][1]:<5.2f}{r['base_size']:>9}"
            f"{r['base_write'][0] / w:>7.1f}x{r['base_read'][0] / r['read'][0]:>7.1f}x"
        )


async def bench_log(
    tmp: str, mode: str, appenders: int, total: int
) -> tuple[float, float, float, int]:
    store = FileStore(os.path.join(tmp, f"log-{mode}-{appenders}"))
    run = "log"
    await store.create_run(RunManifest(run_id=run, workflow="b", input=b"", input_hash=""))
    writer = LogWriter(store, run, start=0)
    per = total // appenders
    latencies: list[float] = []
    payload = b"x" * 150  # ~200 bytes encoded with the record's fields

    async def appender(k: int) -> None:
        for i in range(per):
            t = time.perf_counter()
            position = writer.add(EventRecord(kind="step", data=payload, step_id=f"{k}/{i}"))
            due = {"sync": True, "batched": i % 10 == 9, "phase": i == per - 1}[mode]
            if due:
                await writer.flush(position + 1)
                latencies.append((time.perf_counter() - t) * 1000)
            if mode != "sync" and i % 10 == 0:
                await anyio.lowlevel.checkpoint()  # let other appenders add between flushes

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(appenders):
            tg.start_soon(appender, k)
    await writer.flush()
    elapsed = time.perf_counter() - start
    await store.aclose()
    p50, p95 = pct(latencies)
    return per * appenders / elapsed, p50, p95, writer.appends


async def fsync_round_trip(tmp: str, n: int) -> float:
    path = os.path.join(tmp, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    data = b"y" * 4096

    def one() -> None:
        os.write(fd, data)
        os.fsync(fd)

    samples = await atimed(lambda _i: anyio.to_thread.run_sync(one), n)
    os.close(fd)
    return pct(samples)[0]


async def main(quick: bool) -> None:
    rng = random.Random(7)
    n = 20 if quick else 60
    print(f"machine: {os.cpu_count()} cpus, {cpu_model()}, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        rows = []
        for label, state, reps in [
            ("1 KB", sized(rng, 1_000), n),
            ("100 KB", sized(rng, 100_000), n),
            ("1 MB", sized(rng, 1_000_000), max(5, n // 4)),
            ("10 MB", sized(rng, 10_000_000), 5),
            ("1000 tasks", thousand_tasks(rng), n * 2),
        ]:
            rows.append(await bench_state(label.replace(" ", ""), state, tmp, reps))
            rows[-1]["label"] = label
        state_table(rows, Codec().describe())
        probe = await fsync_round_trip(tmp, 50)
        print(f"\nOne 4 KB append + fsync + thread round trip (reference): {probe:.3f} ms p50")
        print("\nLog appends, 200-byte records, LogWriter over FileStore")
        print(
            f"{'mode':<9}{'appenders':>10}{'records/s':>12}{'latency p50':>13}{'p95':>9}"
            f"{'appends':>9}{'vs ref':>8}"
        )
        total = 2000 if quick else 6000
        for mode in ("sync", "batched", "phase"):
            for appenders in (1, 10, 100):
                count = min(total, 600 if mode == "sync" and appenders == 1 else total)
                rate, p50, p95, appends = await bench_log(tmp, mode, appenders, count)
                ratio = f"{p50 / probe:>7.2f}x" if mode == "sync" and appenders == 1 else ""
                print(
                    f"{mode:<9}{appenders:>10}{rate:>12.0f}{p50:>12.3f}{p95:>9.3f}{appends:>9}{ratio}"
                )
        await checkpoint_writes(tmp, 30 if quick else 100)


async def checkpoint_writes(tmp: str, n: int) -> None:
    """``write_snapshot`` as it is (temp file and rename, no sync) against the same write
    followed by ``sync_snapshots`` (fsync, rename, folder fsync): a write before issue 13."""
    rng = random.Random(11)
    store = FileStore(os.path.join(tmp, "ckpt"))
    run = "ckpt"
    await store.create_run(RunManifest(run_id=run, workflow="b", input=b"", input_hash=""))
    print("\nCheckpoint write, ms p50/p90 (FileStore, random phase results; taking turns)")
    print(f"{'snapshot':<10}{'stored':>9}{'write (now)':>16}{'write + sync':>16}{'ratio':>8}")
    count = 0
    for label, size in (("1 KB", 1_000), ("30 KB", 30_000), ("300 KB", 300_000)):
        phases = {
            f"unit.{k}": PhaseEndRecord(
                phase_id=f"unit.{k}", name="unit", result=rng.randbytes(size // 10)
            )
            for k in range(10)
        }
        plain: list[float] = []
        synced: list[float] = []
        stored = 0
        for i in range(2 * n):
            count += 1
            snap = Snapshot(
                run_id=run,
                snapshot_id=f"{count:06d}",
                position=count,
                created=time.time(),
                trigger="bench",
                phases=phases,
            )
            start = time.perf_counter()
            info = await store.write_snapshot(snap)
            if i % 2:
                await store.sync_snapshots(run, [info.snapshot_id])
                synced.append((time.perf_counter() - start) * 1000)
            else:
                plain.append((time.perf_counter() - start) * 1000)
            stored = info.stored_size
        (p50, p90), (s50, s90) = (statistics.quantiles(v, n=10)[4:9:4] for v in (plain, synced))
        times = f"{p50:>8.3f}/{p90:<7.3f}{s50:>8.3f}/{s90:<7.3f}"
        print(f"{label:<10}{stored:>9}{times}{p50 / s50:>7.2f}x")
    await store.aclose()


async def thread_trips(tmp: str, n: int, backend: str) -> None:
    """Worker-thread round trips: ``anyio.to_thread`` against the FileStore's pool, interleaved."""
    fd = os.open(os.path.join(tmp, "trip-probe"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    data = b"z" * 4096

    def append() -> None:
        os.write(fd, data)
        os.fsync(fd)

    for label, fn in (("no-op", int), ("4 KB write+fsync", append)):
        base: list[float] = []
        pool: list[float] = []
        for _ in range(n):
            t = time.perf_counter()
            await anyio.to_thread.run_sync(fn)
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            await run_in_thread(fn)
            pool.append(time.perf_counter() - t)
        b, p = sorted(base)[n // 2] * 1e6, sorted(pool)[n // 2] * 1e6
        print(f"{backend:<9}{label:<18}{b:>12.0f}{p:>12.0f}{p / b:>8.2f}x")
    os.close(fd)


def append_styles(tmp: str, n: int) -> None:
    """800-byte appends: a growing file + fsync (the old log) against writes inside
    zeros set aside + fdatasync (the log now), alone and beside a checkpoint-like writer."""
    data = b"x" * 800

    def growing(path: str) -> list[float]:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        out = []
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            out.append(time.perf_counter() - t)
        os.close(fd)
        return out

    def set_aside(path: str) -> list[float]:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.pwrite(fd, bytes(n * len(data)), 0)
        os.fsync(fd)
        out = []
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, data, i * len(data))
            os.fdatasync(fd)
            out.append(time.perf_counter() - t)
        os.close(fd)
        return out

    stop = threading.Event()

    def checkpoints(folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        i = 0
        while not stop.is_set():
            temp = os.path.join(folder, ".tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, b"s" * 3000)
            os.fsync(fd)
            os.close(fd)
            os.rename(temp, os.path.join(folder, f"{i}.ckpt"))
            dfd = os.open(folder, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
            i += 1
            stop.wait(0.002)

    print("\nLog append of 800 bytes, µs p50/p90: growing + fsync vs inside zeros + fdatasync")
    print(f"{'beside':<22}{'growing':>16}{'set aside':>16}{'ratio':>8}")
    for label in ("nothing", "checkpoint writes"):
        writer = None
        if label != "nothing":
            writer = threading.Thread(target=checkpoints, args=(os.path.join(tmp, "ck"),))
            writer.start()
        old = growing(os.path.join(tmp, f"grow-{label[0]}"))
        new = set_aside(os.path.join(tmp, f"aside-{label[0]}"))
        if writer is not None:
            stop.set()
            writer.join()
        (o50, o90), (n50, n90) = (statistics.quantiles(v, n=10)[4:9:4] for v in (old, new))
        print(
            f"{label:<22}{o50 * 1e6:>8.0f}/{o90 * 1e6:<7.0f}{n50 * 1e6:>8.0f}/{n90 * 1e6:<7.0f}"
            f"{n50 / o50:>7.2f}x"
        )


async def trips_main(quick: bool, backend: str) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        await thread_trips(tmp, 100 if quick else 400, backend)


async def loop_pauses(tmp: str, n: int, backend: str) -> None:
    """The longest pause of the event loop while a state blob is stored.

    Baseline: sealing (address, compress, checksum) on the loop, as the store
    did before it moved into the writing thread; that whole time the loop ran
    nothing. A task that yields in a loop measures the gaps.
    """
    rng = random.Random(11)
    store = FileStore(os.path.join(tmp, f"pause-{backend}"))
    await store.create_run(RunManifest(run_id="p", workflow="b", input=b"", input_hash=""))
    codec = store.codec
    for label, state in [("1000 tasks", thousand_tasks(rng)), ("1 MB", sized(rng, 1_000_000))]:
        raw = encode_state(state)
        on_loop: list[float] = []
        longest: list[float] = []
        for i in range(n):
            data = raw + i.to_bytes(4, "big")  # a new blob each time: sealed and written
            start = time.perf_counter()
            codec.dump_blob(data, run_id="p")
            on_loop.append(time.perf_counter() - start)
            longest.append(await _longest_gap(store.put_blob("p", data)))
        base, gap = statistics.median(on_loop) * 1e3, statistics.median(longest) * 1e3
        print(f"{backend:<9}{label:<13}{base:>15.3f}{gap:>15.3f}{gap / base:>8.2f}x")
    await store.aclose()


async def _longest_gap(work: Any) -> float:
    """Await ``work`` while a second task yields in a loop; the longest gap between its turns."""
    longest = 0.0
    done = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await anyio.lowlevel.checkpoint()
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()  # the ticker has started before the work does
        await work
        done = True
    return longest


async def pauses_main(quick: bool, backend: str) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        await loop_pauses(tmp, 10 if quick else 40, backend)


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        append_styles(folder, 100 if "--quick" in sys.argv else 400)
    print("\nWorker thread round trip p50, µs: anyio.to_thread vs the FileStore's pool")
    print(f"{'backend':<9}{'call':<18}{'to_thread':>12}{'pool':>12}{'ratio':>9}")
    for backend in ("asyncio", "trio"):
        anyio.run(trips_main, "--quick" in sys.argv, backend, backend=backend)
    print("\nLongest event-loop pause while a state is stored, ms p50: sealing on the loop")
    print("(the store's old way) vs put_blob, which now seals in its worker thread")
    print(f"{'backend':<9}{'state':<13}{'seal on loop':>15}{'put_blob':>15}{'ratio':>8}")
    for backend in ("asyncio", "trio"):
        anyio.run(pauses_main, "--quick" in sys.argv, backend, backend=backend)
