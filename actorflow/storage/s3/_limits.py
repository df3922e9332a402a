"""An S3 store's rate budgets (``SharedLimits``), split across the live workers.

S3 has no lock to share a window under, so each process keeps its own windows
and slots and takes its share of each budget: the budget divided by the
workers whose lease (``workers/<id>``) is live, at least one each. The count
is read again (one LIST, a GET per worker) at most every ``refresh`` seconds,
so a worker joining or leaving changes the shares that much later.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

from actorflow.storage._windows import take_window

if TYPE_CHECKING:
    from actorflow.storage.s3._workers import WorkerLeases

__all__ = ["SplitLimits"]


class _Window:
    __slots__ = ("starts", "token_sum", "tokens")

    def __init__(self) -> None:
        self.starts: collections.deque[float] = collections.deque()
        self.tokens: collections.deque[tuple[float, float]] = collections.deque()
        self.token_sum = 0.0


def _share(budget: int | None, workers: int) -> int | None:
    return None if budget is None else max(1, budget // workers)


class SplitLimits:
    """This process's share of each limit key's budget."""

    def __init__(self, workers: WorkerLeases, refresh: float) -> None:
        self._workers = workers
        self._refresh = refresh
        self._count = 1
        self._counted = -float("inf")
        self._windows: dict[str, _Window] = {}
        self._slots: dict[str, int] = {}

    async def live_workers(self) -> int:
        """The live workers sharing the budgets (at least this one), read at most every refresh."""
        now = time.monotonic()
        if now - self._counted >= self._refresh:
            self._count = max(1, await self._workers.count_live())
            self._counted = now
        return self._count

    async def take(
        self, key: str, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> float:
        """Take one request from this process's share of ``key``'s windows."""
        workers = await self.live_workers()
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window()
        wait, window.token_sum = take_window(
            window.starts,
            window.tokens,
            window.token_sum,
            per_minute=_share(per_minute, workers),
            tokens_per_minute=_share(tokens_per_minute, workers),
            now=now,
        )
        return wait

    def spend(self, key: str, tokens: float, now: float) -> None:
        """Count ``tokens`` in this process's window of ``key``."""
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window()
        window.tokens.append((now, tokens))
        window.token_sum += tokens

    async def take_slot(self, key: str, slots: int) -> str | None:
        """Hold one of this process's share of ``key``'s slots, or None."""
        share = max(1, slots // await self.live_workers())
        held = self._slots.get(key, 0)
        if held >= share:
            return None
        self._slots[key] = held + 1
        return key

    def release_slot(self, key: str) -> None:
        """Give a slot back."""
        self._slots[key] -= 1
