"""A long run's cost per phase: does a snapshot grow with the run?

Run: ``.venv/bin/python benchmarks/long_run.py [--quick] [--phases=300,3000]``.
An orchestrator calls one ``@phase`` N times; each returns 1 KB of random
bytes (1 KB of results per phase, incompressible). FileStore, default
durability (``batched``). The sizes take turns, one run each per round.

- run: wall time of ``runtime.run`` and the runtime's exit (which writes the
  snapshots still queued), and the bytes the process wrote meanwhile
  (``wchar`` of /proc/self/io: every write call, log, snapshots, blobs),
  against N KB of results; and the newest snapshot's stored size.
- recovery: a child process runs the same workflow and is killed (SIGKILL)
  as phase N+1 starts; then, in this process, "list" is listing the run's
  snapshots (a folder of N phase-end snapshot files), "head" is reading the newest
  snapshot as stored (``store.read_snapshot``), "whole" the same with its
  history put back (``read_full_snapshot``, where this version has it), and
  "recover" a fresh Runtime's ``recover(run_id)`` to the run's end (it
  replays every one of the N phase calls from their records). The same again
  after pruning the crashed store to its newest 2 snapshots
  (``keep_phase_ends=False``): the file store lists a run's snapshots from
  their file names, one per phase end kept.

Every ratio compares figures of the same run of this script; the targets
(issue 24) are ratios of the large size to the small one.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING

import anyio
from _machine import cpu_model

import actorflow.storage
from actorflow import Orchestrator, RunContext, Runtime, phase
from actorflow.runtime import RuntimeConfig
from actorflow.storage import FileStore, RetentionPolicy

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.storage import Snapshot, Store

# only in versions with history chunks; an older version is measured for a before/after table
_read_whole: Callable[[Store, str, str], Awaitable[Snapshot]] | None = getattr(
    actorflow.storage, "read_full_snapshot", None
)

QUICK = "--quick" in sys.argv
ROUNDS = 1 if QUICK else 3
SIZES: tuple[int, ...] = (300, 3000)
for arg in sys.argv:
    if arg.startswith("--phases="):
        SIZES = tuple(int(x) for x in arg.split("=", 1)[1].split(","))

_KILL_AT = os.environ.get("LONG_RUN_KILL_AT")


class LongRun(Orchestrator):
    @phase
    async def unit(self, ctx: RunContext, i: int) -> bytes:
        if _KILL_AT is not None and i == int(_KILL_AT) and not await anyio.Path(_marker()).exists():
            await _written(i)
            os.kill(os.getpid(), signal.SIGKILL)
        return os.urandom(1024)

    async def run(self, ctx: RunContext, phases: int) -> int:
        total = 0
        for i in range(phases):
            total += len(await self.unit(ctx, i))
        return total


async def _written(phases: int) -> None:
    """Wait (bounded) until the snapshot of the end of phase ``phases - 1`` is stored."""
    store = FileStore(os.path.dirname(_marker()))
    with anyio.move_on_after(60):
        while True:
            ends = [i for i in await store.list_snapshots("long") if i.trigger == "phase_end"]
            if len(ends) >= phases:
                return
            await anyio.sleep(0.01)


def _marker() -> str:
    return os.environ["LONG_RUN_MARKER"]


def _wchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


async def one_run(root: str, n: int) -> tuple[float, int, int]:
    """(seconds, bytes written, newest snapshot's stored size) of one N-phase run."""
    store = FileStore(root)
    before, start = _wchar(), time.perf_counter()
    async with Runtime(store=store, config=RuntimeConfig()) as runtime:
        await runtime.run(LongRun, n, run_id="long")
    # the runtime's exit waits for the snapshots still queued: part of the run's cost
    seconds = time.perf_counter() - start
    written = _wchar() - before
    infos = await store.list_snapshots("long")
    return seconds, written, infos[-1].stored_size


def crashed_store(n: int) -> str:
    """A store whose N-phase run was killed as phase N+1 started (in a child process)."""
    root = tempfile.mkdtemp(prefix="long-crash-")
    env = dict(os.environ, LONG_RUN_KILL_AT=str(n), LONG_RUN_MARKER=os.path.join(root, "done"))
    code = (
        "import anyio, long_run\n"
        "from actorflow import Runtime\n"
        "from actorflow.runtime import Durability, RuntimeConfig\n"
        "from actorflow.storage import FileStore\n"
        "async def main():\n"
        "    config = RuntimeConfig(durability=Durability.PHASE)\n"
        f"    async with Runtime(store=FileStore({root!r}), config=config) as rt:\n"
        f"        await rt.run(long_run.LongRun, {n + 1}, run_id='long')\n"
        "anyio.run(main)\n"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join([here, env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code], env=dict(env, PYTHONPATH=path), timeout=600, check=False
    )
    assert done.returncode == -signal.SIGKILL, f"the child was not killed: {done.returncode}"
    return root


async def one_recovery(root: str, pruned: bool) -> tuple[float, float, float, float]:
    """(list, head, whole, recover) seconds on a crashed store (its snapshots pruned first)."""
    os.environ["LONG_RUN_MARKER"] = os.path.join(root, "done")
    await anyio.Path(os.environ["LONG_RUN_MARKER"]).touch()
    store = FileStore(root)
    if pruned:
        await store.prune(RetentionPolicy(keep_last=2, keep_phase_ends=False))
    start = time.perf_counter()
    newest = (await store.list_snapshots("long"))[-1].snapshot_id
    listed = time.perf_counter() - start
    start = time.perf_counter()
    await store.read_snapshot("long", newest)
    head = time.perf_counter() - start
    start = time.perf_counter()
    if _read_whole is not None:
        await _read_whole(store, "long", newest)
    else:
        await store.read_snapshot("long", newest)
    whole = time.perf_counter() - start
    async with Runtime(store=FileStore(root)) as runtime:
        start = time.perf_counter()
        results = await runtime.recover("long")
        recover = time.perf_counter() - start
    assert "long" in results, "the run did not finish"
    return listed, head, whole, recover


def main() -> None:
    runs: dict[int, list[tuple[float, int, int]]] = {n: [] for n in SIZES}
    recoveries: dict[tuple[int, bool], list[tuple[float, float, float, float]]] = {
        (n, pruned): [] for n in SIZES for pruned in (False, True)
    }
    for _ in range(ROUNDS):
        for n in SIZES:
            root = tempfile.mkdtemp(prefix="long-run-")
            try:
                runs[n].append(anyio.run(one_run, root, n))
            finally:
                shutil.rmtree(root)
            crashed = crashed_store(n)
            copy = crashed + "-pruned"
            subprocess.run(["cp", "-a", crashed, copy], check=True, timeout=120)
            try:
                recoveries[n, False].append(anyio.run(one_recovery, crashed, False))
                recoveries[n, True].append(anyio.run(one_recovery, copy, True))
            finally:
                shutil.rmtree(crashed)
                shutil.rmtree(copy)
    small = SIZES[0]
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {sys.version.split()[0]}")
    print(f"{ROUNDS} round(s); medians; ratios to the {small}-phase run of this sitting\n")
    print("| phases | run s | x | ms/phase | MB written | x results | newest snapshot KB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    base_run = statistics.median(r[0] for r in runs[small])
    for n in SIZES:
        seconds = statistics.median(r[0] for r in runs[n])
        written = statistics.median(r[1] for r in runs[n])
        newest = statistics.median(r[2] for r in runs[n])
        print(
            f"| {n:,} | {seconds:.2f} | {seconds / base_run:.1f}x | {seconds / n * 1000:.2f} "
            f"| {written / 1e6:.1f} | {written / (n * 1024):.1f}x | {newest / 1024:.1f} |"
        )
    print(
        "\n| phases | snapshots kept | list ms | x | head ms | x | whole ms | x | recover s | x |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pruned in (False, True):
        base = [statistics.median(r[i] for r in recoveries[small, pruned]) for i in range(4)]
        for n in SIZES:
            row = [statistics.median(r[i] for r in recoveries[n, pruned]) for i in range(4)]
            cells = [f"{row[i] * 1000:.2f} | {row[i] / base[i]:.1f}x" for i in range(3)]
            kept = "newest 2" if pruned else "every phase end"
            print(
                f"| {n:,} | {kept} | {' | '.join(cells)} | {row[3]:.3f} | {row[3] / base[3]:.1f}x |"
            )


if __name__ == "__main__":
    main()
