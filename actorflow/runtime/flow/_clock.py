"""``Clock``: the time that retry backoffs and limits read and sleep on.

The runtime takes one (``Runtime(clock=...)``); :class:`SystemClock` by default,
``actorflow.testing.FakeClock`` in tests that must not wait in real time.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import anyio

__all__ = ["Clock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Where flow control reads the time and waits."""

    def now(self) -> float:
        """The current time in seconds since the epoch (shared by processes on one machine)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (no wait for zero or less, but a checkpoint)."""
        ...


class SystemClock:
    """The wall clock and the event loop's sleep."""

    __slots__ = ()

    def now(self) -> float:
        """``time.time()``."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """``anyio.sleep(seconds)``."""
        await anyio.sleep(max(seconds, 0.0))
