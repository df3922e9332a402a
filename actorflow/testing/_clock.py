"""``FakeClock``: the runtime's time (``Runtime(clock=...)``), moved by the test, not the wall.

Retry backoffs and limits read and sleep on it; schedules and queues'
``per_minute`` windows read it.
"""

from __future__ import annotations

import datetime

import anyio

__all__ = ["FakeClock"]


def _seconds(value: float | datetime.datetime) -> float:
    return value.timestamp() if isinstance(value, datetime.datetime) else float(value)


class FakeClock:
    """A :class:`~actorflow.runtime.Clock` whose time moves only when told to.

    With ``autojump`` (the default), a sleep moves the time to its own end at
    once, so a run with minutes of backoff and rate waits takes no real time
    and every sleeper sees the time it waited for. Without it, sleepers wait
    until :meth:`advance` (or :meth:`set`) moves the time past their deadline.
    Workers look at their schedules every poll; after :meth:`advance`,
    ``runtime.adopt_now()`` makes them look at once.

    Args:
        start: the time it shows first: seconds since the epoch, or an aware
            ``datetime``.
        autojump: whether a sleep moves the time itself.

    .. versionadded:: 0.5
    """

    def __init__(self, start: float | datetime.datetime = 0.0, *, autojump: bool = True) -> None:
        self._now = _seconds(start)
        self.autojump = autojump
        self._sleepers: list[tuple[float, anyio.Event]] = []
        self._changed: anyio.Event | None = None  # made in the loop, when first waited on

    def now(self) -> float:
        """The time it shows."""
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

    def advance(self, seconds: float | datetime.timedelta) -> float:
        """Move forward by ``seconds`` and wake the sleepers whose deadline passed; the new time.

        Raises:
            ValueError: ``seconds`` is negative (a clock never goes back).
        """
        step = seconds.total_seconds() if isinstance(seconds, datetime.timedelta) else seconds
        if step < 0:
            raise ValueError("a FakeClock only moves forward")
        self._set(self._now + step)
        return self._now

    def set(self, now: float | datetime.datetime) -> None:
        """Show ``now`` from here on (the sleepers it passes wake)."""
        self._set(_seconds(now))

    def _set(self, now: float) -> None:
        self._now = now
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
