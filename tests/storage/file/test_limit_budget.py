"""The file store's budget record: the same answers as ``take_window``, rewritten in place,
and a damaged or foreign record starts the budget afresh."""

from __future__ import annotations

import collections
import os
import random
from typing import TYPE_CHECKING

from actorflow.storage import FileStore, take_window
from actorflow.storage.file._fs import OSFileSystem
from actorflow.storage.file._limits import LimitFiles

if TYPE_CHECKING:
    from pathlib import Path


def test_the_budget_answers_as_take_window_does(tmp_path: Path) -> None:
    rng = random.Random(26)
    for trial in range(100):
        budget = LimitFiles(OSFileSystem(), str(tmp_path / f"t{trial}"))
        starts: collections.deque[float] = collections.deque()
        tokens: collections.deque[tuple[float, float]] = collections.deque()
        total = 0.0
        per_minute = rng.choice([None, 1, 3, 10])
        per_tokens = rng.choice([None, 5, 50]) if per_minute else rng.choice([5, 50])
        now = 0.0
        for _ in range(60):
            now += rng.choice([0.0, 0.5, 5.0, 20.0, 61.0])
            at = now - rng.choice([0.0, 0.0, 3.0])  # a caller whose clock is behind
            if rng.random() < 0.3:
                spent = rng.choice([1.0, 7.0, 20.0])
                budget.spend("k", spent, at)
                tokens.append((at, spent))
                total += spent
                continue
            wait, counted = budget.take("k", per_minute, per_tokens, at)
            expected, total = take_window(
                starts, tokens, total, per_minute=per_minute, tokens_per_minute=per_tokens, now=at
            )
            assert wait == expected
            assert counted == max(at, starts[-1] if starts else at)
        budget.close()


async def test_a_damaged_or_foreign_record_starts_the_budget_afresh(tmp_path: Path) -> None:
    async with FileStore(tmp_path) as store:
        assert await store.take_limit("k", per_minute=1, tokens_per_minute=None, now=0.0) == 0.0
        assert await store.take_limit("k", per_minute=1, tokens_per_minute=None, now=1.0) > 0
    record = tmp_path / "limits" / "k.budget"
    for damage in (b"", b"\x01", b"not a budget record at all", record.read_bytes()[:-4]):
        record.write_bytes(damage)
        async with FileStore(tmp_path) as store:
            assert await store.take_limit("k", per_minute=1, tokens_per_minute=None, now=2.0) == 0.0


async def test_a_shorter_record_over_a_longer_one_reads_back(tmp_path: Path) -> None:
    async with FileStore(tmp_path) as store:
        for n in range(50):
            await store.take_limit("k", per_minute=100, tokens_per_minute=None, now=float(n))
        # a minute on, the window drops what is older: a shorter record, written in place
        assert await store.take_limit("k", per_minute=100, tokens_per_minute=None, now=108.0) == 0
    async with FileStore(tmp_path) as store:
        for _ in range(2):
            assert await store.take_limit("k", per_minute=3, tokens_per_minute=None, now=109.0) == 0
        assert await store.take_limit("k", per_minute=3, tokens_per_minute=None, now=109.0) > 0


def test_a_forked_child_does_not_share_the_parents_hold_on_the_budget(tmp_path: Path) -> None:
    fs = OSFileSystem()
    budget = LimitFiles(fs, str(tmp_path))
    assert budget.take("k", 2, None, 0.0) == (0.0, 0.0)  # the budget file is open now
    held = fs.open_lockable(str(tmp_path / "k.budget"))
    assert fs.flock(held, wait=False)  # another holder (as another process would be)
    pid = os.fork()
    if pid == 0:  # the child: its budget must see the lock held, not take it through a copy
        os._exit(0 if budget.try_take("k", 2, None, 1.0) is None else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    fs.unlock(held)
    assert budget.try_take("k", 2, None, 2.0) == (0.0, 2.0)
    budget.close()
