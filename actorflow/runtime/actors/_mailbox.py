"""A bounded mailbox on anyio's primitives: one receiver (the actor), many senders.

It is leaner than a memory object stream pair because the receiver is always
the one actor task: the buffer is a deque, a waiting receiver or sender parks
on an ``anyio.Event``, and nothing yields to the scheduler unless it must wait
(see docs/actors.md, "Does send yield?").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar, cast

import anyio
import anyio.lowlevel

from actorflow.errors import MailboxClosedError, MailboxFullError

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["CLOSED", "Mailbox", "MailboxStatistics"]

T = TypeVar("T")


class _Backend(Protocol):
    """What the mailbox needs of the running event loop (``anyio.abc.AsyncBackend`` has it)."""

    def create_event(self) -> anyio.Event: ...
    async def checkpoint(self) -> None: ...
    async def checkpoint_if_cancelled(self) -> None: ...


class _PublicCalls:
    """The same through anyio's top-level calls, which find the backend on every call."""

    create_event = staticmethod(anyio.Event)
    checkpoint = staticmethod(anyio.lowlevel.checkpoint)
    checkpoint_if_cancelled = staticmethod(anyio.lowlevel.checkpoint_if_cancelled)


# anyio's top-level calls look the backend up on every call (a sniffio query
# and two more frames), which cost `send` about 16% (measured on both loops).
# A mailbox asks once, when it is made, for the running loop's backend class,
# which anyio >= 4.11's public event loop token carries; without one, it uses
# the top-level calls.
_current_token: Callable[[], object] | None = getattr(anyio.lowlevel, "current_token", None)


def _backend() -> _Backend:
    backend = getattr(_current_token(), "backend_class", None) if _current_token else None
    return _PublicCalls() if backend is None else cast("_Backend", backend)


class _Closed:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CLOSED"


CLOSED: Final = _Closed()
"""What :meth:`Mailbox.get` returns once the mailbox is closed and empty."""


@dataclass(frozen=True, slots=True)
class MailboxStatistics:
    """A mailbox's state at one moment.

    Attributes:
        current_size: messages waiting to be handled.
        max_size: capacity; a sender waits (or ``send_nowait`` raises) beyond it.
        waiting_senders: tasks blocked in ``send`` for lack of room.
        closed: whether the mailbox refuses new messages.
    """

    current_size: int
    max_size: int
    waiting_senders: int
    closed: bool


class Mailbox(Generic[T]):
    """A bounded FIFO queue with one receiver; full means senders wait, never drop.

    Args:
        owner: the actor's name, for error messages.
        max_size: capacity, at least 1.
    """

    __slots__ = ("_backend", "_buf", "_closed", "_getter", "_max", "_owner", "_putters")

    # Whether ``put`` yields to the scheduler on every call. The benchmark flips
    # it to measure both choices; docs/actors.md explains why it is False.
    yield_on_put: bool = False

    def __init__(self, owner: str, max_size: int) -> None:
        self._owner = owner
        self._backend = _backend()
        self._max = max_size
        self._buf: deque[T] = deque()
        self._closed = False
        self._getter: anyio.Event | None = None
        self._putters: deque[anyio.Event] | None = None

    @property
    def receiver_waiting(self) -> bool:
        """Whether the receiver is parked in :meth:`get` on an empty mailbox."""
        return self._getter is not None

    def statistics(self) -> MailboxStatistics:
        """Return the current size, capacity, blocked senders and closed flag."""
        putters = self._putters
        return MailboxStatistics(
            len(self._buf), self._max, len(putters) if putters else 0, self._closed
        )

    def new_event(self) -> anyio.Event:
        """An event of the running backend, without looking the backend up."""
        return self._backend.create_event()

    def put_nowait(self, item: T) -> None:
        """Append ``item`` without waiting.

        Raises:
            MailboxClosedError: the mailbox is closed.
            MailboxFullError: the mailbox holds ``max_size`` messages.
        """
        if self._closed:
            raise MailboxClosedError(self._owner)
        buf = self._buf
        if len(buf) >= self._max:
            raise MailboxFullError(self._owner, self._max)
        buf.append(item)
        getter = self._getter
        if getter is not None:
            self._getter = None
            getter.set()

    async def put(self, item: T) -> None:
        """Append ``item``, waiting for room while the mailbox is full.

        Always a cancellation point; if cancelled, ``item`` was not added.

        Raises:
            MailboxClosedError: the mailbox is closed, or closes while waiting.
        """
        if self.yield_on_put:
            await self._backend.checkpoint()
        else:
            await self._backend.checkpoint_if_cancelled()
        if len(self._buf) >= self._max:
            await self.put_checked(item)
        else:
            self.put_nowait(item)

    async def put_checked(self, item: T) -> None:
        """:meth:`put` for a caller that has just checked for cancellation itself."""
        while len(self._buf) >= self._max and not self._closed:
            await self._wait_for_room()
        self.put_nowait(item)

    async def _wait_for_room(self) -> None:
        if self._putters is None:
            self._putters = deque()
        event = self._backend.create_event()
        self._putters.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():
                # we were handed a free slot we will not use: pass it on
                self._wake_putter()
            else:
                self._putters.remove(event)
            raise

    def _wake_putter(self) -> None:
        putters = self._putters
        if putters:
            putters.popleft().set()

    async def get(self) -> T | _Closed:
        """Remove and return the oldest message, waiting if there is none.

        Returns:
            The message, or :data:`CLOSED` once the mailbox is closed and empty.
        """
        buf = self._buf
        while not buf:
            if self._closed:
                return CLOSED
            event = self._getter = self._backend.create_event()
            try:
                await event.wait()
            finally:
                self._getter = None
        item = buf.popleft()
        if self._putters:
            self._putters.popleft().set()
        return item

    def get_nowait(self) -> T | None:
        """Remove and return the oldest message, or None if there is none."""
        if not self._buf:
            return None
        item = self._buf.popleft()
        if self._putters:
            self._putters.popleft().set()
        return item

    def close(self) -> None:
        """Refuse new messages; the receiver still gets those already queued.

        Blocked senders wake and raise :class:`MailboxClosedError`. Idempotent.
        """
        self._closed = True
        getter, self._getter = self._getter, None
        if getter is not None:
            getter.set()
        putters, self._putters = self._putters, None
        while putters:
            putters.popleft().set()

    def drain(self) -> list[T]:
        """Remove and return every queued message (used when the actor stops)."""
        items = list(self._buf)
        self._buf.clear()
        return items
