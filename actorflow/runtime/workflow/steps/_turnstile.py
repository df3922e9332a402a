"""``Turnstile``: one agent's step records in the order its messages were delivered."""

from __future__ import annotations

import anyio

__all__ = ["Turnstile"]


class Turnstile:
    """Orders one agent's step records by the order its messages were delivered.

    Replies wake their waiters in whatever order the event loop picks (trio
    picks at random), but each record carries the agent's state after that
    message, so records must reach the log in the agent's handling order:
    ticket ``t`` is recorded only after every earlier ticket was released.
    """

    __slots__ = ("_changed", "_done", "_next", "_serving")

    def __init__(self) -> None:
        self._next = 0
        self._serving = 0
        self._done: set[int] = set()
        # made only when someone must wait: most records are in order already
        self._changed: anyio.Event | None = None

    def take(self) -> int:
        """A ticket for a message about to be delivered (in delivery order)."""
        ticket = self._next
        self._next = ticket + 1
        return ticket

    def ready(self, ticket: int) -> bool:
        """Whether every ticket before ``ticket`` was released (``wait`` would not block)."""
        return self._serving >= ticket

    async def wait(self, ticket: int) -> None:
        """Wait until every ticket before ``ticket`` was released."""
        while self._serving < ticket:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    def release(self, ticket: int) -> None:
        """Done with ``ticket`` (recorded, failed over to a retry, or abandoned)."""
        self._done.add(ticket)
        advanced = False
        while self._serving in self._done:
            self._done.remove(self._serving)
            self._serving += 1
            advanced = True
        if advanced and self._changed is not None:
            changed, self._changed = self._changed, None
            changed.set()
