"""The default mode's loss window, with real processes killed by SIGKILL.

A child (``loss_window_child``) runs one phase that asks ten callers at once;
their answers come at spread-out times, each execution written to a side file.
The child prints which callers' results each log append made durable. The
parent SIGKILLs it at a random moment (seeded; ``CRASH_TEST_SEED`` replays
one), recovers in a new child, and checks:

- the result equals that of a run never killed;
- a caller whose result the killed child reported durable ran exactly once;
- so did every caller that finished more than ``MARGIN`` before the kill:
  the flush delay bounds how long a finished result stays only in memory.
  (``MARGIN`` is the default 20 ms delay plus room for a loaded machine to
  carry out the append; the report of durability is what the first check
  relies on.)

Kills: 10 per backend.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest

from actorflow import RuntimeConfig
from tests import forkserver
from tests.runtime.workflow.loss_window_child import SPACING, TASKS, expected, side_file

ROOT = Path(__file__).resolve().parents[3]
KILLS = 10
MARGIN = RuntimeConfig().flush_delay + 0.5
DEADLINE = 60.0


@dataclass
class Child:
    """What one child printed: executions with when the parent read them, durable callers."""

    executed: dict[str, float] = field(default_factory=dict)
    durable: set[str] = field(default_factory=set)
    result: object = None
    killed_at: float | None = None


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTORFLOW_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _take(child: Child, line: str, now: float) -> None:
    kind, _, rest = line.partition(" ")
    if kind == "X":
        child.executed.setdefault(rest, now)
    elif kind == "D":
        child.durable.update(rest.split())
    elif kind == "RESULT":
        child.result = msgspec.json.decode(rest)


def run_child(
    store: Path, backend: str, mode: str, *, kill_after: int | None = None, extra: float = 0.0
) -> Child:
    """Run a child to its end, or SIGKILL it ``extra`` s after its ``kill_after``-th execution."""
    proc = forkserver.popen(
        [
            sys.executable,
            "-m",
            "tests.runtime.workflow.loss_window_child",
            str(store),
            "run",
            backend,
            mode,
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    child = Child()
    buffer = b""
    deadline = time.monotonic() + DEADLINE
    kill_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if kill_at is not None and now >= kill_at and child.killed_at is None:
                proc.send_signal(signal.SIGKILL)
                child.killed_at = now
            if now > deadline:
                raise TimeoutError(f"a loss-window child ran for {DEADLINE} s")
            wait = deadline - now
            if kill_at is not None and child.killed_at is None:
                wait = max(0.0, kill_at - now)
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buffer += chunk
            # lines read after the kill were printed before it, at an unknown moment
            stamp = time.monotonic() if child.killed_at is None else child.killed_at
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                _take(child, line.decode(), stamp)
            if kill_after is not None and kill_at is None and len(child.executed) >= kill_after:
                kill_at = time.monotonic() + extra
    finally:
        proc.kill()
        proc.wait(timeout=DEADLINE)
        proc.stdout.close()
    return child


def side_lines(store: Path) -> list[str]:
    path = Path(side_file(str(store)))
    return (
        [line.split(" ", 1)[1] for line in path.read_text().splitlines()] if path.exists() else []
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_finished_results_survive_a_kill_in_the_default_mode(tmp_path: Path, backend: str) -> None:
    seed = int(os.environ.get("CRASH_TEST_SEED") or int.from_bytes(os.urandom(4), "big"))
    print(f"crash test seed: {seed} (CRASH_TEST_SEED={seed} replays it)")
    rng = random.Random(seed)
    for kill in range(KILLS):
        store = tmp_path / f"store-{kill}"
        killed = run_child(
            store,
            backend,
            "start",
            kill_after=rng.randint(1, TASKS - 1),  # the last never finishes
            extra=rng.uniform(0.0, 2 * SPACING),
        )
        assert killed.killed_at is not None
        assert killed.result is None, "the run ended before the kill"
        recovered = run_child(store, backend, "recover")
        assert recovered.result == {"run": expected()}, f"kill {kill}"
        runs = side_lines(store)
        counts = {agent: runs.count(agent) for agent in set(runs)}
        assert set(counts) == {f"caller-{i}" for i in range(TASKS)}
        reported = {a: counts[a] for a in killed.durable}
        assert all(n == 1 for n in reported.values()), f"kill {kill}: durable ran again {reported}"
        settled = {
            a: counts[a] for a, t in killed.executed.items() if t < killed.killed_at - MARGIN
        }
        assert all(n == 1 for n in settled.values()), f"kill {kill}: finished ran again {settled}"
