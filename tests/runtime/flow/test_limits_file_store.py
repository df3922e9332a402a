"""Limits across processes on one file store: one budget file per key, under its flock."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import Limit, Runtime
from actorflow.storage import FileStore, FileSystem
from actorflow.storage.file._limits import LimitFiles
from actorflow.testing import FakeClock
from tests.runtime.flow import test_limits
from tests.runtime.flow.limit_child import PER_MINUTE
from tests.runtime.flow.test_limits import Calls, Fan, FanOut, _most_in_a_minute
from tests.runtime.workflow.crash_parent import ROOT, child_env

if TYPE_CHECKING:
    from pathlib import Path

CHILDREN = 3
EACH = 60
CHILD_TIMEOUT = 90.0
LOCK_SLACK = 55.0


class AuditedLimitFiles(LimitFiles):
    """Notes the time the budget counts each request it gave out at, under its lock."""

    def __init__(self, fs: FileSystem, root: str, given: list[float]) -> None:
        super().__init__(fs, root)
        self.given = given

    def take(
        self, key: str, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> tuple[float, float]:
        wait, at = super().take(key, per_minute, tokens_per_minute, now)
        if wait <= 0:
            self.given.append(at)
        return wait, at

    def try_take(
        self, key: str, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> tuple[float, float] | None:
        taken = super().try_take(key, per_minute, tokens_per_minute, now)
        if taken is not None and taken[0] <= 0:
            self.given.append(taken[1])
        return taken


class AuditedFileStore(FileStore):
    def __init__(self, path: Path, given: list[float]) -> None:
        super().__init__(path)
        self._limits = AuditedLimitFiles(self.fs, str(path / "limits"), given)


async def test_three_runtimes_on_one_file_store_share_a_rate(tmp_path: Path) -> None:
    # three stores on one folder take their flocks apart, as three processes would
    clock = FakeClock(start=1_000.0)
    test_limits.calls = calls = Calls(clock)
    given: list[float] = []
    limits = [Limit("openai", per_minute=60)]
    async with (
        Runtime(store=AuditedFileStore(tmp_path, given), limits=limits, clock=clock) as a,
        Runtime(store=AuditedFileStore(tmp_path, given), limits=limits, clock=clock) as b,
        Runtime(store=AuditedFileStore(tmp_path, given), limits=limits, clock=clock) as c,
    ):
        # 8 agents over 3 runtimes, 25 asks each: 200 asks, one budget
        handles = [
            await runtime.start(FanOut, Fan("RateLimited", agents, 25))
            for runtime, agents in ((a, 3), (b, 3), (c, 2))
        ]
        for handle in handles:
            await handle.result()
    assert len(calls.starts) == 200
    assert len(given) == 200
    assert _most_in_a_minute(given) == 60
    assert clock.now() >= 1_000.0 + 3 * 60.0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_three_processes_never_take_more_than_the_budget_in_any_minute(
    tmp_path: Path, backend: str
) -> None:
    t0 = time.time() + 0.5  # a clock sixty times the wall's, shared by the children
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.runtime.flow.limit_child",
                str(tmp_path),
                backend,
                repr(t0),
                str(EACH),
            ],
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(CHILDREN)
    ]
    taken: list[float] = []
    for child in children:
        out, err = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == 0, err
        taken += [float(line) for line in out.split()]
    assert len(taken) == CHILDREN * EACH
    # a child reads its clock before it waits for the budget's lock: the time it
    # notes may be a little earlier than the one the budget kept (a fake second
    # is 17 ms of the wall's): never more than the budget in any 55 s (three budgets: 180)
    assert _most_in_a_minute(taken, window=LOCK_SLACK) <= PER_MINUTE


def test_the_limit_file_is_left_whole_for_the_next_reader(tmp_path: Path) -> None:
    async def main() -> float:
        async with FileStore(tmp_path) as store:
            await store.take_limit("k", per_minute=1, tokens_per_minute=None, now=0.0)
        async with FileStore(tmp_path) as store:
            return await store.take_limit("k", per_minute=1, tokens_per_minute=None, now=30.0)

    assert anyio.run(main) == 30.0


async def test_three_runtimes_on_one_file_store_share_a_concurrency_cap(tmp_path: Path) -> None:
    test_limits.calls = calls = Calls()
    limits = [Limit("db", max_concurrent=2)]
    async with (
        Runtime(store=FileStore(tmp_path), limits=limits) as a,
        Runtime(store=FileStore(tmp_path), limits=limits) as b,
        Runtime(store=FileStore(tmp_path), limits=limits) as c,
    ):
        handles = [
            await runtime.start(FanOut, Fan("Capped", agents, 10))
            for runtime, agents in ((a, 3), (b, 3), (c, 2))
        ]
        for handle in handles:
            await handle.result()
    assert len(calls.starts) == 80
    assert calls.most_inside <= 2  # each runtime would allow 2 by itself: 6 in all
