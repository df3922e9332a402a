"""What snapshots cost the 10-phase run of peers.py, beside its log and in memory.

Run: ``python benchmarks/snapshot_cost.py [--quick] [--backend=asyncio|trio]``.
The run is peers.py's "phases" (10 ``@phase`` units of a 1 KB record each),
on a FileStore in ``sync`` and ``batched`` and on a MemoryStore. Three
variants take turns run by run in one Runtime, so the machine's load hits
them alike:

- written: as the store does it (the FileStore seals each snapshot in a
  worker thread and writes it to a new file, temp file and rename, no sync);
- sealed only: the same encoding, compression and sealing in the same trip,
  no file written (MemoryStore: sealed, not kept);
- none: ``write_snapshot`` returns at once.

For the FileStore it also times each ``os.fdatasync`` (the log's appends
inside the space set aside) and ``os.fsync``: a snapshot file made while an
append syncs slows that sync down. The variants patch the stores' private
snapshot writers: this measures, it changes nothing for anyone else.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import anyio
from _machine import cpu_model
from peers import UNITS, Phases

from actorflow import Runtime
from actorflow.runtime import Durability, RuntimeConfig
from actorflow.storage import FileStore, MemoryStore
from actorflow.storage._manifests import snapshot_info
from actorflow.storage.file._snapshots import SnapshotFiles

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage import Snapshot, SnapshotInfo

QUICK = "--quick" in sys.argv
RUNS = 20 if QUICK else 80  # per variant, taking turns run by run
VARIANTS = ("written", "sealed only", "none")

SYNC_TIMES: dict[str, list[float]] = defaultdict(list)
_current = ["written"]


def _timed(name: str, original: Callable[[Any], None]) -> Callable[[Any], None]:
    def sync(fd: Any) -> None:
        start = time.perf_counter()
        try:
            original(fd)
        finally:
            SYNC_TIMES[f"{_current[0]}/{name}"].append(time.perf_counter() - start)

    return sync


_file_write = SnapshotFiles._seal_and_write
_memory_write = MemoryStore.write_snapshot


def _file_sealed_only(self: SnapshotFiles, snapshot: Snapshot) -> SnapshotInfo:
    sealed, raw = self._codec.dump_snapshot(snapshot)
    return snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)


def _file_none(self: SnapshotFiles, snapshot: Snapshot) -> SnapshotInfo:
    return snapshot_info(snapshot, stored_size=0, raw_size=0)


async def _memory_sealed_only(self: MemoryStore, snapshot: Snapshot, **_: Any) -> SnapshotInfo:
    sealed, raw = self.codec.dump_snapshot(snapshot)
    return snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)


async def _memory_none(self: MemoryStore, snapshot: Snapshot, **_: Any) -> SnapshotInfo:
    return snapshot_info(snapshot, stored_size=0, raw_size=0)


def _use(variant: str) -> None:
    _current[0] = variant
    file_writer = {"written": _file_write, "sealed only": _file_sealed_only, "none": _file_none}
    memory_writer: dict[str, Any] = {
        "written": _memory_write,
        "sealed only": _memory_sealed_only,
        "none": _memory_none,
    }
    SnapshotFiles._seal_and_write = file_writer[variant]  # type: ignore[method-assign]
    MemoryStore.write_snapshot = memory_writer[variant]  # type: ignore[method-assign]


async def runs(store: str, durability: Durability) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="af-snapcost-", dir=os.environ.get("BENCH_DIR")) as d:
        chosen = MemoryStore() if store == "memory" else FileStore(d)
        async with Runtime(store=chosen, config=RuntimeConfig(durability=durability)) as runtime:
            for variant in VARIANTS:
                _use(variant)
                await runtime.run(Phases, UNITS)
            SYNC_TIMES.clear()
            for i in range(RUNS):
                shift = i % len(VARIANTS)
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    _use(variant)
                    start = time.perf_counter()
                    await runtime.run(Phases, UNITS)
                    times[variant].append(time.perf_counter() - start)
                    await runtime._runs.pruner.wait()  # retention stays out of the next run
            _use("written")
    return times


def main() -> None:
    backend = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--backend=")), "asyncio")
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cpus, {cpu_model()}; {backend}")
    for name in ("fdatasync", "fsync"):
        setattr(os, name, _timed(name, getattr(os, name)))
    load = os.getloadavg()[0]
    print(f"\n{'run':<26}{'variant':<13}{'p50 ms':>8}{'p90 ms':>8}{'x written':>10}  syncs p50 µs")
    for store, durability in [
        ("file", Durability.SYNC),
        ("file", Durability.BATCHED),
        ("memory", Durability.BATCHED),
    ]:
        times = anyio.run(runs, store, durability, backend=backend)
        base = statistics.median(times["written"])
        for variant in VARIANTS:
            ts = sorted(times[variant])
            syncs = "  ".join(
                f"{name.split('/')[1]} {statistics.median(v) * 1e6:.0f} ({len(v) / RUNS:.0f}/run)"
                for name, v in sorted(SYNC_TIMES.items())
                if name.startswith(variant + "/") and store == "file"
            )
            label = f"{store} {durability}"
            p50, p90 = statistics.median(ts), ts[int(0.9 * (len(ts) - 1))]
            print(
                f"{label:<26}{variant:<13}{p50 * 1e3:>8.2f}{p90 * 1e3:>8.2f}"
                f"{p50 / base:>9.2f}x  {syncs}"
            )
    print(f"\n{RUNS} runs per variant; load average {load:.1f} → {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
