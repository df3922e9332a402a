"""Where benchmark 1's checkpointing cost goes (a diagnostic, not a target).

Run: ``.venv/bin/python benchmarks/checkpoint_parts.py [--quick]``. The
10-phase workflow of ``workflow.py`` (160 steps of ~1 ms of pure-Python work,
FileStore, ``batched``) runs with parts of its snapshot writing left out, the
variants taking turns run by run in one process so the disk's mood hits them
alike. It patches private hooks of the runtime and the store to leave parts
out, so it measures this version's internals; the figures are in
benchmarks/RESULTS.md ("Workflow: where checkpointing goes").

- all: as shipped (snapshot files are written without fsyncs, since issue 13).
- synced snapshots: each snapshot file and its folder are fsynced as it is
  written, as every snapshot was before.
- no snapshot writes: the checkpoint actor still receives each snapshot and
  waits for the log, but stores only the run's final one.

"Non-work" is a run's wall time minus the time inside ``burn()``; "barrier"
is the p50 time of the log appends the run waits for (21 per run).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

import anyio
import workflow
from _machine import cpu_model

from actorflow import Runtime
from actorflow.runtime import Durability, RuntimeConfig
from actorflow.runtime.workflow import _checkpointer as checkpointer
from actorflow.storage import FileStore
from actorflow.storage import _logwriter as logwriter
from actorflow.storage.file import _snapshots

if TYPE_CHECKING:
    from actorflow.runtime.workflow._replay import Capture

VARIANTS = ("all", "synced snapshots", "no snapshot writes")
REPS = 5 if "--quick" in sys.argv else 15

_variant = ["all"]
_appends: dict[str, list[float]] = {v: [] for v in VARIANTS}

_write = checkpointer.CheckpointQueue.write
_folder_write = _snapshots.SnapshotFolder.write
_carry = logwriter.LogWriter._carry


async def _queue_write(self: checkpointer.CheckpointQueue, capture: Capture) -> int | None:
    if _variant[0] == "no snapshot writes" and capture.snapshot.status == "running":
        await self.writer.flush(capture.snapshot.position)
        return 0
    return await _write(self, capture)


def _folder_write_maybe_synced(self: _snapshots.SnapshotFolder, name: str, sealed: bytes) -> None:
    _folder_write(self, name, sealed)
    if _variant[0] == "synced snapshots":
        info = self.parse(name)
        assert info is not None
        self.sync([info.snapshot_id])


async def _timed_carry(self: logwriter.LogWriter, attempt: Any) -> None:
    start = time.perf_counter()
    await _carry(self, attempt)
    _appends[_variant[0]].append(time.perf_counter() - start)


async def main() -> None:
    checkpointer.CheckpointQueue.write = _queue_write  # type: ignore[method-assign]
    _snapshots.SnapshotFolder.write = _folder_write_maybe_synced  # type: ignore[method-assign]
    logwriter.LogWriter._carry = _timed_carry  # type: ignore[method-assign]
    config = RuntimeConfig(durability=Durability.BATCHED, retention=None)
    non_work: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        async with Runtime(store=FileStore(tmp), config=config) as runtime:
            await runtime.run(workflow.TenPhases, workflow.PHASES)  # warm-up
            for v in _appends.values():
                v.clear()
            for _ in range(REPS):
                for variant in VARIANTS:
                    _variant[0] = variant
                    workflow.BURNED[0] = 0.0
                    start = time.perf_counter()
                    await runtime.run(workflow.TenPhases, workflow.PHASES)
                    non_work[variant].append(time.perf_counter() - start - workflow.BURNED[0])
    full = statistics.median(non_work["all"])
    print(f"{'variant':<22}{'non-work ms/run':>17}{'µs/step vs all':>16}{'barrier ms':>12}")
    for variant in VARIANTS:
        mine = statistics.median(non_work[variant])
        delta = (mine - full) * 1e6 / workflow.STEPS_1
        barrier = statistics.median(_appends[variant]) * 1e3
        print(f"{variant:<22}{mine * 1e3:>17.2f}{delta:>16.1f}{barrier:>12.3f}")


if __name__ == "__main__":
    workflow.calibrate()
    print(
        f"python {sys.version.split()[0]}; {os.cpu_count()} cpus, {cpu_model()}; "
        f"{REPS} runs of each variant, taking turns"
    )
    for backend in ("asyncio", "trio"):
        print(f"\n{backend}")
        anyio.run(main, backend=backend)
