"""A clock tests move by hand, for schedules (``Runtime(clock=FakeClock(...))``)."""

from __future__ import annotations

import datetime

__all__ = ["FakeClock"]


class FakeClock:
    """A wall clock that stands still until told to move.

    Args:
        start: the time it shows first: seconds since the epoch, or an
            aware ``datetime``.

    Workers look at their schedules every poll; after :meth:`advance`,
    ``runtime.adopt_now()`` makes them look at once.

    .. versionadded:: 0.6
    """

    def __init__(self, start: float | datetime.datetime = 0.0) -> None:
        self._now = start.timestamp() if isinstance(start, datetime.datetime) else float(start)

    def now(self) -> float:
        """The time it shows."""
        return self._now

    def advance(self, seconds: float | datetime.timedelta) -> float:
        """Move forward by ``seconds`` (never back); the new time."""
        step = seconds.total_seconds() if isinstance(seconds, datetime.timedelta) else seconds
        if step < 0:
            raise ValueError("a FakeClock only moves forward")
        self._now += step
        return self._now

    def set(self, now: float | datetime.datetime) -> None:
        """Show ``now`` from here on."""
        self._now = now.timestamp() if isinstance(now, datetime.datetime) else float(now)
