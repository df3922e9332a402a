"""``FakeClock``: flow control's time, moved by the test instead of the wall."""

from __future__ import annotations

import anyio

__all__ = ["FakeClock"]


class FakeClock:
    """A :class:`~actorflow.runtime.Clock` whose time moves only when told to.

    With ``autojump`` (the default), a sleep moves the time to its own end at
    once, so a run with minutes of backoff and rate waits takes no real time
    and every sleeper sees the time it waited for. Without it, sleepers wait
    until :meth:`advance` moves the time past their deadline.

    Args:
        start: the time it starts at, in seconds.
        autojump: whether a sleep moves the time itself.
    """

    def __init__(self, start: float = 0.0, *, autojump: bool = True) -> None:
        self._now = float(start)
        self.autojump = autojump
        self._sleepers: list[tuple[float, anyio.Event]] = []
        self._changed: anyio.Event | None = None  # made in the loop, when first waited on

    def now(self) -> float:
        """The fake time."""
        return self._now

    @property
    def sleepers(self) -> int:
        """How many tasks sleep on this clock now."""
        return len(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of fake time."""
        deadline = self._now + max(seconds, 0.0)
        if self.autojump:
            await anyio.lowlevel.checkpoint()
            self._now = max(self._now, deadline)
            return
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        entry = (deadline, anyio.Event())
        self._sleepers.append(entry)
        self._poke()
        try:
            await entry[1].wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)
                self._poke()

    def advance(self, seconds: float) -> None:
        """Move the time forward ``seconds`` and wake the sleepers whose deadline passed."""
        self._now += seconds
        for entry in [e for e in self._sleepers if e[0] <= self._now]:
            self._sleepers.remove(entry)
            entry[1].set()
        self._poke()

    async def wait_for_sleepers(self, count: int) -> None:
        """Until at least ``count`` tasks sleep on the clock."""
        while len(self._sleepers) < count:
            self._changed = anyio.Event()
            await self._changed.wait()

    def _poke(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None
