"""SIGKILL crash tests: a real child process writes until killed at a random moment.

After every kill, everything the child reported durable is there, every record
that loads is intact, every listed snapshot loads, and the store opens cleanly
(the dead child's flock is gone, appends continue). 25 kills per event loop.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from actorflow.storage import FileStore
from tests import forkserver
from tests.lines import Lines
from tests.storage.file.crash_child import RUN, blob_data, record

KILLS = 25
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Reported:
    length: int = 0
    snapshots: set[str] = field(default_factory=set)
    blobs: set[str] = field(default_factory=set)


def run_child_until_killed(folder: Path, backend: str, lines: int, seen: Reported) -> None:
    child = forkserver.popen(
        [sys.executable, "-m", "tests.storage.file.crash_child", str(folder), backend],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        said = Lines(child.stdout)
        for _ in range(lines):
            line = said.next(30)
            assert line, f"the child died: {child.stderr.read().decode() if child.stderr else ''}"
            kind, value = line.split()
            if kind == "L":
                seen.length = max(seen.length, int(value))
            elif kind == "S":
                seen.snapshots.add(value)
            else:
                seen.blobs.add(value)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL


async def check(folder: Path, seen: Reported) -> None:
    store = FileStore(folder)
    try:
        lease = await store.claim(RUN, "checker")  # the dead child's lock went with it
        log = await store.read_log(RUN)
        assert len(log) >= seen.length
        for position, rec in enumerate(log):
            assert rec == record(position)
        listed = {s.snapshot_id for s in await store.list_snapshots(RUN)}
        assert seen.snapshots <= listed
        for sid in listed:
            snap = await store.read_snapshot(RUN, sid)
            assert snap.position <= len(log)
            state = snap.agents["a"].state
            assert state is not None
            assert await store.get_blob(RUN, state.blob) == blob_data(snap.position)
        for ref in seen.blobs:
            assert await store.has_blob(RUN, ref)
        await store.release(lease)
    finally:
        await store.aclose()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_at_random_moments_loses_nothing_reported(
    tmp_path: Path, anyio_backend: str
) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"crash test seed: {seed}")
    rng = random.Random(seed)
    seen = Reported()
    for _ in range(KILLS):
        run_child_until_killed(tmp_path / "store", anyio_backend, rng.randint(1, 12), seen)
        anyio.run(check, tmp_path / "store", seen, backend=anyio_backend)
    assert seen.length > KILLS  # the children made progress across the kills
