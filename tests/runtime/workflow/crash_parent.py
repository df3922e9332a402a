"""The parent's side of the workflow SIGKILL tests: start, watch and kill crash children.

A child is ``python -m tests.runtime.workflow.crash_child`` (see there for its
protocol). ``run_child`` reads its stdout with ``os.read`` (no buffered
reader whose buffer ``select`` cannot see) and kills it with SIGKILL once the
requested number of executions and snapshots were reported.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actorflow.errors import RunNotFoundError
from actorflow.storage import StepRecord
from tests import forkserver
from tests.lines import Lines
from tests.runtime.workflow.crash_child import open_crash_store, side_file

ROOT = Path(__file__).resolve().parents[3]
CHILD_DEADLINE = 45.0
"""Longest a child may take from start to exit, in seconds."""


@dataclass
class ChildOutcome:
    """What one child reported before it exited or was killed."""

    pid: int
    killed: bool
    returncode: int
    executed: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None

    @property
    def results(self) -> dict[str, Any]:
        assert self.report is not None, "the child printed no RESULT"
        return dict(self.report["results"])

    @property
    def stored(self) -> dict[str, Any]:
        """Results of every completed run in the store, recovered by this child or not."""
        assert self.report is not None, "the child printed no RESULT"
        return dict(self.report["stored"])

    @property
    def statuses(self) -> dict[str, str]:
        assert self.report is not None, "the child printed no RESULT"
        return dict(self.report["statuses"])


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTORFLOW_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def run_child(
    store: Path,
    run_id: str,
    backend: str,
    mode: str,
    *,
    kill_after: int | None = None,
    min_snapshots: int = 0,
    after_started: bool = False,
    hold: bool = False,
    env: dict[str, str] | None = None,
) -> ChildOutcome:
    """Run a child; SIGKILL it after ``kill_after`` executions (and ``min_snapshots``).

    ``kill_after=0`` kills it as soon as its runtime is open (with
    ``after_started``, once its runs are all in the store). Without
    ``kill_after`` the child runs to its end (or its own death). With
    ``hold`` the child's ``kill_after``-th execution never finishes, so its
    run cannot end before the kill lands (everything else in it goes on).
    """
    env = dict(env or child_env())
    if hold and kill_after:
        env["CRASH_HOLD_AFTER"] = str(kill_after)
    errors = store.parent / f"{store.name}.stderr"
    with errors.open("ab") as stderr:
        child = forkserver.popen(
            [
                sys.executable,
                "-m",
                "tests.runtime.workflow.crash_child",
                str(store),
                run_id,
                backend,
                mode,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    assert child.stdout is not None
    outcome = ChildOutcome(pid=child.pid, killed=False, returncode=0)
    lines = Lines(child.stdout)
    deadline = time.monotonic() + CHILD_DEADLINE
    ready = started = False
    try:
        while True:
            if (
                kill_after is not None
                and ready
                and (started or not after_started)
                and len(outcome.executed) >= kill_after
                and len(outcome.snapshots) >= min_snapshots
            ):
                child.send_signal(signal.SIGKILL)
                outcome.killed = True
                break
            line = lines.next(deadline - time.monotonic())
            if line is None:
                break
            kind, _, rest = line.partition(" ")
            if kind == "READY":
                ready = True
            elif kind == "STARTED":
                started = True
            elif kind == "X":
                outcome.executed.append(rest)
            elif kind == "S":
                outcome.snapshots.append(rest)
            elif kind == "RESULT":
                outcome.report = msgspec.json.decode(rest)
    except BaseException:
        child.kill()
        raise
    finally:
        outcome.returncode = child.wait(timeout=CHILD_DEADLINE)
        child.stdout.close()
    if not outcome.killed and outcome.returncode == 0:
        assert outcome.report is not None, _tail(errors)
    elif not outcome.killed:
        outcome.report = None
    return outcome


def _tail(path: Path) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return f"the child printed no RESULT; its stderr ends with:\n{text[-3000:]}"


def executions(store: Path) -> list[tuple[int, str]]:
    """Every execution any child recorded: (pid, step key), in order."""
    path = Path(side_file(str(store)))
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        pid, _, key = line.partition(" ")
        found.append((int(pid), key))
    return found


async def _durable_asks(store: Path, run_ids: list[str]) -> set[str]:
    files = open_crash_store(store)
    keys: set[str] = set()
    try:
        for run_id in run_ids:
            try:
                log = await files.read_log(run_id)
            except RunNotFoundError:
                continue
            keys.update(
                f"{run_id}/{r.step_id}"
                for r in log
                if isinstance(r, StepRecord) and r.kind == "ask"
            )
    finally:
        await files.aclose()
    return keys


def durable_asks(store: Path, run_ids: list[str]) -> set[str]:
    """Keys of the ask steps whose records are in the runs' logs now."""
    return anyio.run(_durable_asks, store, run_ids)


def run_exists(store: Path, run_id: str) -> bool:
    """Whether the run's manifest was written."""
    if store.suffix == ".db":
        return store.exists() and anyio.run(_sqlite_run_exists, store, run_id)
    return (store / "runs" / run_id / "manifest").exists()


async def _sqlite_run_exists(store: Path, run_id: str) -> bool:
    opened = open_crash_store(store)
    try:
        await opened.read_run(run_id)
    except RunNotFoundError:
        return False
    finally:
        await opened.aclose()
    return True


def reran(store: Path, durable_at_start: dict[int, set[str]]) -> list[tuple[int, str]]:
    """Executions of steps that had a durable record before their process started."""
    return [(pid, key) for pid, key in executions(store) if key in durable_at_start.get(pid, set())]
