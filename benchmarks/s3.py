"""S3 store benchmark: snapshot write/read and log appends on a local SeaweedFS.

Run: ``.venv/bin/python benchmarks/s3.py [--quick]``. Starts ``weed mini`` on
127.0.0.1 (free ports, data in a temporary folder), then measures the S3 store
next to the file store in the same run, on asyncio and on trio. The ratio is
S3 / file (for latencies: how many times slower S3 is). The S3 figures are a
local server over loopback: they show the store's own overhead (HTTP, signing,
the trio helper thread), not a remote bucket's network latency.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actorflow.storage import (
    FileStore,
    RunManifest,
    S3Store,
    Snapshot,
    StepRecord,
    Store,
)
from tests.storage.s3_servers import S3Server, seaweed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

QUICK = "--quick" in sys.argv
ROUNDS = 10 if QUICK else 40
APPENDS = 50 if QUICK else 300


def _task_state() -> bytes:
    """The issue's "1000 tasks" state: id, status, ~200-char result, timestamps, duration."""
    tasks = [
        {
            "id": f"task-{i:04d}",
            "status": "done" if i % 7 else "failed",
            "result": (f"summary of task {i}: " + "lorem ipsum dolor sit amet " * 8)[:200],
            "started": 1_700_000_000.0 + i,
            "finished": 1_700_000_000.5 + i,
            "duration": 0.5 + (i % 13) / 10,
        }
        for i in range(1000)
    ]
    return msgspec.msgpack.encode(tasks)


def _states() -> dict[str, bytes]:
    # Random bytes do not compress: the store moves their full size.
    return {
        "1 KB": os.urandom(1024),
        "100 KB": os.urandom(102_400),
        "1000 tasks": _task_state(),
        "1 MB": os.urandom(1_048_576),
    }


def _snapshot(run_id: str, i: int, payload: bytes) -> Snapshot:
    step = StepRecord(step_id="main/0", kind="ask", target="worker", result=payload)
    return Snapshot(
        run_id=run_id,
        snapshot_id=f"s{i}",
        position=i,
        created=time.time(),
        trigger="bench",
        steps=(step,),
    )


async def _timed(fn: Callable[[], Awaitable[Any]], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t) * 1000)
    return times


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _measure(store: Store) -> dict[str, float]:
    out: dict[str, float] = {}
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    manifest = RunManifest(run_id=run_id, workflow="bench", input=b"\x90", input_hash="h")
    await store.create_run(manifest)
    counter = iter(range(1_000_000))
    for label, payload in _states().items():
        rounds = max(5, ROUNDS // 4) if len(payload) > 500_000 else ROUNDS
        ids: list[str] = []

        async def write(payload: bytes = payload, ids: list[str] = ids) -> None:
            snap = _snapshot(run_id, next(counter), payload)
            await store.write_snapshot(snap)
            ids.append(snap.snapshot_id)

        w = await _timed(write, rounds)
        r = await _timed(partial(_read_next, store, run_id, iter(ids)), rounds)
        c = await _timed(partial(_read_next, store, run_id, iter(ids), cold=True), rounds)
        out[f"snapshot write p50 ms, {label}"] = _p(w, 0.5)
        out[f"snapshot write p95 ms, {label}"] = _p(w, 0.95)
        out[f"snapshot read p50 ms, {label}"] = _p(r, 0.5)
        out[f"snapshot read p95 ms, {label}"] = _p(r, 0.95)
        out[f"snapshot cold read p50 ms, {label}"] = _p(c, 0.5)
    small = f"{run_id}-small"
    await store.create_run(msgspec.structs.replace(manifest, run_id=small))
    for i in range(5):
        await store.write_snapshot(_snapshot(small, i, b"x" * 1024))
    for rid in (small, run_id):
        count = len(await store.list_snapshots(rid))
        listed = await _timed(partial(store.list_snapshots, rid), ROUNDS)
        out[f"snapshot list p50 ms, {count} snapshots"] = _p(listed, 0.5)
        out[f"snapshot list p95 ms, {count} snapshots"] = _p(listed, 0.95)
    record = StepRecord(step_id="main/1", kind="ask", target="w", result=b"x" * 150)
    a = await _timed(lambda: store.append(run_id, [record]), APPENDS)
    out["append p50 ms, 1 writer"] = _p(a, 0.5)
    out["append p95 ms, 1 writer"] = _p(a, 0.95)
    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(_appender, store, run_id, record, APPENDS // 10)
    out["append records/s, 10 writers"] = APPENDS / (time.perf_counter() - t)
    return out


async def _read_next(store: Store, run_id: str, ids: Iterator[str], *, cold: bool = False) -> None:
    snapshot_id = next(ids)
    if cold:
        # As a store that has not listed the run (another process): the S3 store
        # then finds the snapshot's key with a LIST. Other stores have no such cache.
        forget = getattr(getattr(store, "_snapshots", None), "forget", None)
        if forget is not None:
            forget(run_id)
    await store.read_snapshot(run_id, snapshot_id)


async def _appender(store: Store, run_id: str, record: StepRecord, n: int) -> None:
    for _ in range(n):
        await store.append(run_id, [record])


async def _compare(server: S3Server, folder: Path) -> list[tuple[str, float, float]]:
    file_store = FileStore(folder / f"file-{uuid.uuid4().hex[:6]}")
    s3_store = S3Store(
        server.bucket,
        prefix=f"bench-{uuid.uuid4().hex[:6]}",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
    )
    try:
        s3 = await _measure(s3_store)
        file = await _measure(file_store)
    finally:
        await s3_store.aclose()
        await file_store.aclose()
    return [(k, s3[k], file[k]) for k in s3]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="af-s3-bench-") as tmp:
        folder = Path(tmp)
        (folder / "weed").mkdir()
        server = seaweed(folder / "weed")
        server.start()
        try:
            print(f"python {sys.version.split()[0]}, SeaweedFS `weed mini` on 127.0.0.1")
            for backend in ("asyncio", "trio"):
                rows = anyio.run(_compare, server, folder, backend=backend)
                print(f"\n{backend}")
                print(f"{'measure':<38}{'s3':>12}{'file':>12}{'s3/file':>10}")
                for name, s3, file in rows:
                    print(f"{name:<38}{s3:>12,.2f}{file:>12,.2f}{s3 / file:>9.2f}x")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
