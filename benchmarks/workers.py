"""Workers benchmark (issue 15): finding runs to adopt, the worker lease, take-over after a kill.

Run: ``python benchmarks/workers.py [--quick]``. Three tables:

1. Finding runs. A store holds ``TOTAL`` runs, ``UNFINISHED`` of them queued
   and the rest completed. A worker's look (``list_unfinished(unowned=True)``)
   against the baseline a worker would otherwise need: one listing of every
   manifest (``list_runs``). p50 in ms; file store and S3 (SeaweedFS ``weed
   mini`` on 127.0.0.1, when installed).
2. Keeping runs alive on S3: the PUTs one renewal interval costs a store that
   holds 1, 10 or 100 runs, counted at the wire. Before worker leases (issue 12's
   design) every held run's lease was renewed: one PUT per run per interval.
3. Take-over after a SIGKILL: a worker process drives ``RUNS`` runs, each
   blocked in a step; it is killed, and a second worker process takes them
   over. From the kill to every run's manifest naming the survivor (running
   again), over ``ROUNDS`` kills: p50 / p95 in ms, beside what bounds it: the
   survivor's ``poll_interval`` (file store: the kernel drops the flock at
   once) and ``poll_interval`` + ``lease_ttl`` (S3), plus the take-over's own
   requests, some ten in a row per run on S3 (one request's p50 is printed).

Figures go to benchmarks/RESULTS.md ("Workers").
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from _machine import cpu_model
from _servers import local_seaweed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actorflow import Runtime  # noqa: E402
from actorflow.storage import FileStore, RunIndex, RunStatus, S3Store, Store  # noqa: E402
from tests.runtime.workflow import worker_app  # noqa: E402

if TYPE_CHECKING:
    from anyio.abc import Process

    from tests.storage.s3_servers import S3Server

QUICK = "--quick" in sys.argv
SIZES = {"file": (500, 50) if QUICK else (2000, 200), "s3": (200, 20) if QUICK else (600, 60)}
"""(runs in all, unfinished ones) per store: S3 writes a run in many requests."""
LOOKS = 5 if QUICK else 20
RUNS = 8
ROUNDS = 3 if QUICK else 8
POLL = 0.05


def _s3(server: S3Server, prefix: str, **options: Any) -> S3Store:
    return S3Store(
        server.bucket,
        prefix=prefix,
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        **options,
    )


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


# --- 1. finding runs ----------------------------------------------------------------


async def _fill(store: Store, total: int, unfinished: int) -> None:
    async with Runtime(store=store) as rt:
        async with anyio.create_task_group() as tg:
            for i in range(total - unfinished):
                tg.start_soon(functools.partial(rt.run, worker_app.WorkerChain, 0, run_id=f"d{i}"))
        for i in range(unfinished):
            await rt.submit(worker_app.WorkerChain, 0, run_id=f"queued-{i}")


async def _finding(store: Store, total: int, unfinished: int) -> dict[str, float]:
    assert isinstance(store, RunIndex)
    looks, listings = [], []
    for _ in range(LOOKS):
        t = time.perf_counter()
        found = await store.list_unfinished(unowned=True)
        looks.append(time.perf_counter() - t)
        t = time.perf_counter()
        every = await store.list_runs()
        listings.append(time.perf_counter() - t)
    assert len(found) == unfinished, len(found)
    assert len(every) == total, len(every)
    look, listing = _ms(looks, 0.5), _ms(listings, 0.5)
    return {"look": look, "list every manifest": listing, "ratio": listing / look}


# --- 2. the worker lease ------------------------------------------------------------


async def _renewal_puts(server: S3Server, held: int) -> int:
    store = _s3(server, f"bench-lease-{uuid.uuid4().hex[:8]}", lease_ttl=3.0)
    async with Runtime(store=store) as rt:
        for i in range(held):
            await rt.submit(worker_app.WorkerChain, 0, run_id=f"r{i}")
    leases = [await store.claim(f"r{i}", "bench") for i in range(held)]
    puts = 0
    wire = store._objects.wire  # counting at the wire is the point: one line, no benchmark cost
    call = wire.call

    async def counted(operation: str, method: str, **kwargs: Any) -> Any:
        nonlocal puts
        puts += method == "put_object"
        return await call(operation, method, **kwargs)

    wire.call = counted  # type: ignore[method-assign]
    store._leases.workers._renewed = 0.0  # the interval has passed
    for lease in leases:  # what every held run's heartbeat does once per interval
        await store.renew(lease)
    wire.call = call  # type: ignore[method-assign]
    for lease in leases:
        await store.release(lease)
    await store.aclose()
    return puts


# --- 3. take-over after a kill --------------------------------------------------------


async def _worker(store: str, env: dict[str, str], log: Path) -> Process:
    command = worker_app.worker_command(store, poll=POLL, concurrency=RUNS)
    with log.open("ab") as stderr:  # what a worker says, should it fail
        return await anyio.open_process(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )


async def _takeover(location: str, store: Store, env: dict[str, str], tmp: Path) -> list[float]:
    times: list[float] = []
    for round_ in range(ROUNDS):
        side, gate = tmp / f"side-{round_}", tmp / f"gate-{round_}"
        run_env = {**env, "ACTORFLOW_TEST_SIDE": str(side), "ACTORFLOW_TEST_GATE": str(gate)}
        async with Runtime(store=store) as client:
            ids = [
                await client.submit(worker_app.WorkerChain, i, run_id=f"k{round_}-{i}")
                for i in range(RUNS)
            ]
        workers = [await _worker(location, run_env, tmp / "workers.log")]
        try:
            with anyio.fail_after(120):  # a bound: the workers' log says what went wrong
                times.append(
                    await _one_takeover(store, ids, side, gate, workers, location, run_env)
                )
        finally:
            await worker_app.stop_workers(*workers)
    return times


async def _one_takeover(
    store: Store,
    ids: list[str],
    side: Path,
    gate: Path,
    workers: list[Process],
    location: str,
    env: dict[str, str],
) -> float:
    victim = workers[0]
    lines = anyio.Path(side)
    # every run started in the victim and waits at its second tick
    while not await lines.exists() or (await lines.read_text()).count("\n") < 2 * RUNS:  # noqa: ASYNC110
        await anyio.sleep(0.01)
    workers.append(await _worker(location, env, side.parent / "workers.log"))
    await anyio.sleep(1.0)  # the survivor is up and looking, with nothing to take
    owner = (await store.read_run(ids[0])).owner
    victim.send_signal(signal.SIGKILL)
    killed = time.perf_counter()
    await victim.wait()
    pending = set(ids)
    while pending:
        for run_id in list(pending):
            manifest = await store.read_run(run_id)
            if manifest.owner not in (owner, None):
                pending.discard(run_id)
        await anyio.sleep(0.005)
    took = time.perf_counter() - killed
    await anyio.Path(gate).touch()
    for run_id in ids:  # all done before the next round: it has its own gate
        while (await store.read_run(run_id)).status is not RunStatus.COMPLETED:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return took


async def _all(folder: Path, server: S3Server | None) -> None:
    print("\n1. finding runs to adopt: one look vs one listing of every manifest (p50, ms)")
    print(f"   {LOOKS} looks each")
    heads = f"{'runs':>7}{'unfinished':>12}{'look':>10}{'list every manifest':>22}{'ratio':>8}"
    print(f"{'store':<8}{heads}")
    stores: dict[str, Store] = {"file": FileStore(folder / "find")}
    if server is not None:
        stores["s3"] = _s3(server, f"bench-find-{uuid.uuid4().hex[:8]}")
    for name, store in stores.items():
        total, unfinished = SIZES[name]
        await _fill(store, total, unfinished)
        r = await _finding(store, total, unfinished)
        print(
            f"{name:<8}{total:>7}{unfinished:>12}{r['look']:>10.2f}"
            f"{r['list every manifest']:>22.2f}{r['ratio']:>7.1f}x"
        )
        await store.aclose()

    if server is not None:
        print("\n2. S3 PUTs to keep runs alive for one renewal interval (lease_ttl / 3)")
        print(f"{'runs held':<12}{'worker lease':>14}{'a lease per run (before)':>26}")
        for held in (1, 10, 100):
            puts = await _renewal_puts(server, held)
            print(f"{held:<12}{puts:>14}{held:>26}")

    print("\n3. from a worker's SIGKILL to all its runs running again in another worker")
    print(f"   {RUNS} runs per kill, {ROUNDS} kills; poll_interval {POLL} s")
    print(f"{'store':<8}{'p50 ms':>10}{'p95 ms':>10}{'bound':>28}")
    base_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTORFLOW_LOG_LEVEL": "warning",
    }
    file_store = FileStore(folder / "takeover")
    times = await _takeover(str(folder / "takeover"), file_store, base_env, folder)
    print(f"{'file':<8}{_ms(times, 0.5):>10.0f}{_ms(times, 0.95):>10.0f}{'poll_interval':>28}")
    await file_store.aclose()
    if server is not None:
        prefix = f"bench-takeover-{uuid.uuid4().hex[:8]}"
        env = {
            **base_env,
            "ACTORFLOW_S3_ENDPOINT": server.url,
            "AWS_ACCESS_KEY_ID": server.access_key,
            "AWS_SECRET_ACCESS_KEY": server.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        s3_store = _s3(server, prefix)
        times = await _takeover(f"s3://{server.bucket}/{prefix}", s3_store, env, folder)
        bound = f"poll + lease_ttl ({worker_app.LEASE_TTL} s)"
        print(f"{'s3':<8}{_ms(times, 0.5):>10.0f}{_ms(times, 0.95):>10.0f}{bound:>28}")
        # a take-over is some ten requests in a row (claim, fence, take): their cost, here
        gets = []
        for _ in range(20):
            t = time.perf_counter()
            await s3_store.read_run("k0-0")
            gets.append(time.perf_counter() - t)
        print(f"   one S3 request (a manifest GET) here: p50 {_ms(gets, 0.5):.1f} ms")
        await s3_store.aclose()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="af-workers-bench-") as tmp:
        folder = Path(tmp)
        with local_seaweed(folder) as server:
            print(f"machine: {os.cpu_count()} cpus, {cpu_model()}, Python {sys.version.split()[0]}")
            # the in-process runs of table 1 tick with the gate open, into a side file nobody reads
            (folder / "open").touch()
            os.environ["ACTORFLOW_TEST_SIDE"] = str(folder / "side-in-process")
            os.environ["ACTORFLOW_TEST_GATE"] = str(folder / "open")
            anyio.run(_all, folder, server)


if __name__ == "__main__":
    main()
