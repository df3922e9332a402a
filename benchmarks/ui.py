"""Inspector benchmark (issue 25): the runs page over many runs, a long run's page, live latency.

Run: ``python benchmarks/ui.py [--quick]``. A file store is filled through the
store's own API with ``RUNS`` runs (a manifest and three step records each;
one in ten still running) and one run of ``STEPS`` steps. Then:

1. The runs page, served in-process (httpx's ASGI transport, so no network
   is timed): the first request of a fresh app over the store (its first
   index: every manifest read), then the median of ``REPEAT`` more.
2. The long run's page (its first 500 records, then its last page), median.
   Once the listing the pages share has expired (ten runs changed meanwhile),
   a store that tells its runs' versions has only those read again.
3. Step to browser: ``actorflow ui`` serves the store (uvicorn, asyncio) to
   Debian's chromium; a writer appends one step every ``GAP`` seconds to a
   running run, and the page's own ``EventSource`` notes when each step's
   event arrives. Latency = arrival - the moment ``store.append`` returned.
   (The gap is no multiple of the inspector's 50 ms poll, so steps land all
   over its cycle.)
   p50 / p95 over ``SAMPLES`` steps. Skipped without playwright or chromium.

Figures go to benchmarks/RESULTS.md ("Inspector").
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import httpx
import msgspec
from _machine import cpu_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actorflow.storage import FileStore, RunManifest, RunStatus, StepRecord  # noqa: E402
from actorflow.ui import create_app  # noqa: E402
from actorflow.ui._listing import MANIFESTS_TTL  # noqa: E402
from tests.ui.browser import chromium, missing  # noqa: E402
from tests.ui.serving import serving  # noqa: E402

QUICK = "--quick" in sys.argv
RUNS = 1_000 if QUICK else 10_000
STEPS = 1_000 if QUICK else 5_000
REPEAT = 5 if QUICK else 15
SAMPLES = 30 if QUICK else 100
GAP = 0.037
BIG = "big-run"
LIVE = "live-run"


def _step(i: int, now: float) -> StepRecord:
    return StepRecord(
        step_id=f"work.0/{i}",
        kind="ask",
        target=f"agent-{i % 4}",
        result=msgspec.msgpack.encode({"answer": i}),
        issued=now - 0.01,
        time=now,
    )


async def fill(path: str) -> None:
    store = FileStore(path)
    limit = anyio.Semaphore(16)
    now = time.time()

    async def one(i: int) -> None:
        async with limit:
            run_id = f"run-{i:05d}"
            status = RunStatus.RUNNING if i % 10 == 0 else RunStatus.COMPLETED
            await store.create_run(
                RunManifest(
                    run_id=run_id,
                    workflow=f"Flow{i % 3}",
                    input=b"\xa0",
                    input_hash="h",
                    status=status,
                    created=now - i,
                    updated=now - i,
                )
            )
            await store.append(run_id, [_step(j, now - i) for j in range(3)])

    try:
        async with anyio.create_task_group() as tg:
            for i in range(RUNS):
                tg.start_soon(one, i)
        for run_id in (BIG, LIVE):
            await store.create_run(
                RunManifest(
                    run_id=run_id,
                    workflow="Long",
                    input=b"\xa0",
                    input_hash="h",
                    created=now,
                    updated=now,
                )
            )
        for start in range(0, STEPS, 500):
            await store.append(BIG, [_step(j, now + j * 0.001) for j in range(start, start + 500)])
    finally:
        await store.aclose()


async def pages(path: str) -> dict[str, float]:
    store = FileStore(path)
    app = create_app(store, read_only=True)
    transport = httpx.ASGITransport(app=app)
    found: dict[str, float] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:

        async def timed(url: str) -> float:
            began = time.perf_counter()
            reply = await client.get(url)
            assert reply.status_code == 200, (url, reply.status_code)
            return time.perf_counter() - began

        found["runs page, first (cold index)"] = await timed("/")
        found["runs page, then (median; the listing shared for 2 s)"] = statistics.median(
            [await timed("/") for _ in range(REPEAT)]
        )
        expired = []
        for round_ in range(3 if QUICK else 5):
            # ten runs move on meanwhile, as live runs do: their manifests are read again
            moved = functools.partial(msgspec.structs.replace, phase=f"p{round_}")
            for k in range(10):
                await store.update_run(f"run-{(round_ * 10 + k) * 10:05d}", moved)
            await anyio.sleep(MANIFESTS_TTL + 0.1)
            expired.append(await timed("/"))
        found["runs page once the shared listing expired, 10 runs changed (median)"] = (
            statistics.median(expired)
        )
        found["runs page, filtered `?status=running&q=run-0` (median)"] = statistics.median(
            [await timed("/?status=running&q=run-0") for _ in range(REPEAT)]
        )
        found[f"run of {STEPS} steps, first page (median)"] = statistics.median(
            [await timed(f"/runs/{BIG}") for _ in range(REPEAT)]
        )
        found[f"run of {STEPS} steps, last page (median)"] = statistics.median(
            [await timed(f"/runs/{BIG}?from={STEPS - 500}") for _ in range(REPEAT)]
        )
    await store.aclose()
    return found


def latency(path: str) -> list[float] | None:
    if missing() is not None:
        return None
    appended: dict[int, float] = {}
    started = threading.Event()

    async def writer() -> None:
        store = FileStore(path)
        try:
            await anyio.to_thread.run_sync(started.wait)
            for i in range(SAMPLES):
                await anyio.sleep(GAP)
                length = await store.append(LIVE, [_step(i, time.time())])
                appended[length - 1] = time.time()
        finally:
            await store.aclose()

    thread = threading.Thread(target=anyio.run, args=(writer,))
    with serving("--store", path, "--read-only") as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        page.evaluate(
            """run => new Promise(ready => {
                window.arrived = {};
                const source = new EventSource("/runs/" + run + "/events?from=0");
                source.onopen = ready;
                source.addEventListener("record", e => {
                    window.arrived[JSON.parse(e.data).position] = Date.now() / 1000;
                });
            })""",
            LIVE,
        )
        thread.start()
        started.set()
        thread.join()
        page.wait_for_function(f"Object.keys(window.arrived).length >= {SAMPLES}", timeout=60_000)
        arrived = {
            int(k): v for k, v in json.loads(page.evaluate("JSON.stringify(arrived)")).items()
        }
    return [arrived[p] - t for p, t in appended.items() if p in arrived]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp, "store"))
        began = time.perf_counter()
        anyio.run(fill, path)
        print(f"filled {RUNS} runs and one of {STEPS} steps in {time.perf_counter() - began:.1f} s")
        found = anyio.run(pages, path)
        lat = latency(path)
    print(f"\nMachine: {cpu_model()}, Python {sys.version.split()[0]}; file store, in-process\n")
    print("| measure | ms |")
    print("|---|---:|")
    for name, seconds in found.items():
        print(f"| {name} | {seconds * 1000:,.1f} |")
    if lat is None:
        print(f"\nstep to browser: skipped ({missing()})")
    else:
        lat.sort()
        p50 = statistics.median(lat) * 1000
        p95 = lat[int(len(lat) * 0.95) - 1] * 1000
        print(f"| step to browser p50 ({len(lat)} steps, {GAP * 1000:.0f} ms apart) | {p50:.1f} |")
        print(f"| step to browser p95 | {p95:.1f} |")


if __name__ == "__main__":
    main()
