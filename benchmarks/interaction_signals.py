"""Signal round trip: a signal sent from another process, taken by a live run's wait, recorded.

The owner (this process) runs ``Echo``: a loop of ``ctx.wait_for(Ping)``, in
``sync`` durability so each taken signal's record is durable before the
wait returns. A sender process posts a ``Ping`` holding ``time.time()`` as
it starts the post, and the next one once the run has taken it (it reads
the run's log), so no two pings overlap. Round trip = the moment the wait
returns minus the ping's send time: the post (fsync'd entry), the wake-up
(file store: a FIFO push; S3: the owner's poll), the read, the durable
record. Baselines in the same run: the sender's bare ``post`` (its share of
the round trip) and the floor on a file store, two fsyncs through a worker
thread (the entry's and the record's). Run:
``python benchmarks/interaction_signals.py [--s3]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
from _machine import cpu_model

from actorflow import Durability, Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.storage import FileStore, S3Store, StepRecord, Store

_ROOT = str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, _ROOT)

PINGS = 60


class Ping(msgspec.Struct, frozen=True):
    n: int
    sent: float


class Echo(Orchestrator):
    latencies: list[float] = []

    async def run(self, ctx: RunContext, count: int) -> int:
        for _ in range(count):
            ping = await ctx.wait_for(Ping)
            Echo.latencies.append(time.time() - ping.sent)
        return count


def _store(spec: str) -> Store:
    kind, _, where = spec.partition(":")
    if kind == "file":
        return FileStore(where)
    url, bucket, prefix, key, secret = where.split("|")
    return S3Store(
        bucket,
        prefix=prefix,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )


async def _send(spec: str, run_id: str, count: int) -> None:
    """The sender process: one ping at a time; prints the bare post times (ms)."""
    store = _store(spec)
    posts = []
    async with Runtime(store=store) as runtime:
        for n in range(count):
            start = time.time()
            await runtime.signal(run_id, Ping(n, start))
            posts.append((time.time() - start) * 1000)
            while True:  # until the run took it: its wait's record is in the log
                taken = sum(
                    isinstance(r, StepRecord) and r.kind == "wait"
                    for r in await store.read_log(run_id)
                )
                if taken > n:
                    break
                await anyio.sleep(0.002)
    await store.aclose()
    print(msgspec.json.encode(posts).decode(), flush=True)


async def _owner(spec: str, backend: str) -> tuple[list[float], list[float]]:
    Echo.latencies = []
    run_id = f"echo-{os.getpid()}-{backend}"
    config = RuntimeConfig(durability=Durability.SYNC)
    store = _store(spec)
    async with Runtime(store=store, config=config) as runtime:
        handle = await runtime.start(Echo, PINGS, run_id=run_id)
        sender = await anyio.run_process(
            [sys.executable, __file__, "send", spec, run_id, str(PINGS), backend],
            env={**os.environ, "PYTHONPATH": _ROOT},
            check=True,
        )
        await handle.result()
    await store.aclose()
    posts: list[float] = msgspec.json.decode(sender.stdout.strip().splitlines()[-1])
    return [x * 1000 for x in Echo.latencies], posts


async def _two_fsyncs(folder: str) -> float:
    """p50 ms of two fsyncs of a small appended write, each through a worker thread."""
    path = os.path.join(folder, "fsync-floor")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(PINGS):
            start = time.perf_counter()
            for _ in range(2):
                os.write(fd, b"x" * 200)
                await anyio.to_thread.run_sync(os.fsync, fd)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
    return statistics.median(times)


def _row(name: str, trips: list[float], posts: list[float], floor: float | None) -> str:
    p90 = statistics.quantiles(trips, n=10)[8]
    trip, post = statistics.median(trips), statistics.median(posts)
    floor_cells = f"{floor:>10.2f}{trip / floor:>9.2f}x" if floor is not None else ""
    return f"{name:<22}{trip:>10.2f}{p90:>10.2f}{post:>12.2f}{trip / post:>9.2f}x{floor_cells}"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "send":
        anyio.run(_send, sys.argv[2], sys.argv[3], int(sys.argv[4]), backend=sys.argv[5])
        return
    print(f"python {sys.version.split()[0]}, {cpu_model()}, {os.cpu_count()} cores")
    print(f"{PINGS} pings, one at a time; times in ms")
    print(
        f"{'store / loop':<22}{'trip p50':>10}{'trip p90':>10}{'post p50':>12}"
        f"{'trip/post':>10}{'2 fsyncs':>10}{'trip/fl':>10}"
    )
    server: Any = None
    with tempfile.TemporaryDirectory(prefix="af-signal-bench-") as tmp:
        specs = [("file", f"file:{tmp}/store")]
        if "--s3" in sys.argv:
            from tests.storage.s3_servers import seaweed

            (Path(tmp) / "weed").mkdir()
            server = seaweed(Path(tmp) / "weed")
            server.start()
            s3 = f"{server.url}|{server.bucket}|bench|{server.access_key}|{server.secret_key}"
            specs.append(("s3", f"s3:{s3}"))
        try:
            for name, spec in specs:
                for backend in ("asyncio", "trio"):
                    trips, posts = anyio.run(_owner, spec, backend, backend=backend)
                    floor = anyio.run(_two_fsyncs, tmp, backend=backend) if name == "file" else None
                    print(_row(f"{name} / {backend}", trips, posts, floor))
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
