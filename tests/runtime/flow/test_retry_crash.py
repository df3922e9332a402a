"""A SIGKILL in the middle of a retry series: recovery goes on after the recorded attempts."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow.storage import FileStore, StepRecord
from tests.runtime.flow.retry_child import FAILS, KILL_AT
from tests.runtime.workflow.crash_parent import ROOT, child_env

if TYPE_CHECKING:
    from pathlib import Path

CHILD_TIMEOUT = 90.0


def _child(store: Path, backend: str, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.runtime.flow.retry_child", str(store), backend, mode],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_killed_in_a_backoff_the_retries_resume_after_the_recorded_attempts(
    tmp_path: Path, backend: str
) -> None:
    store = tmp_path / "store"
    started = _child(store, backend, "start")
    assert started.returncode == -signal.SIGKILL, started.stderr
    killed = (store.parent / "store.attempts").read_text().split()
    recovered = _child(store, backend, "recover")
    assert recovered.returncode == 0, recovered.stderr
    (line,) = [x for x in recovered.stdout.splitlines() if x.startswith("RESULT ")]
    assert msgspec.json.decode(line.removeprefix("RESULT ")) == {"flaky": FAILS + 1}
    rows = [x.split() for x in (store.parent / "store.attempts").read_text().splitlines()]
    attempts = [int(n) for _, n in rows]
    assert attempts == list(range(1, FAILS + 2)), "no attempt ran twice"
    first_pid = killed[0]
    assert [pid == first_pid for pid, _ in rows] == [True] * KILL_AT + [False] * (
        FAILS + 1 - KILL_AT
    )

    async def record() -> StepRecord:
        async with FileStore(store) as opened:
            log = await opened.read_log("flaky")
        (ask,) = [r for r in log if isinstance(r, StepRecord) and r.kind == "ask"]
        return ask

    ask = anyio.run(record)
    assert ask.attempts == FAILS + 1
    assert [e.message for e in ask.attempt_errors] == [
        f"attempt {n} failed" for n in range(1, FAILS + 1)
    ]
