"""Waiting for a run's inbox to change: the store's side of waking a run's live owner.

A run's owner keeps one task per live run that waits until "the inbox may
have changed", then reads the entries after the last one it took::

    async with watch_messages(store, run_id, poll_interval=0.5) as watch:
        cursor = 0
        while True:
            for entry in await read_messages(store, run_id, cursor):
                ...  # deliver it
                cursor = entry.seq + 1
            await watch.changed()

The watch is opened *before* the first read, so a post landing between the
read and the wait still wakes it. A store that can tell its watchers of a
post is a :class:`SupportsInboxWatch` (the memory store: an event; the file
store: a byte written to a FIFO, across processes; the S3 store: a poll of
the next entry); :func:`watch_messages` falls back to polling for the others.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio
import anyio.lowlevel

from actorflow.errors import InboxUnsupportedError
from actorflow.storage._inbox import SupportsInbox, type_name

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actorflow.storage._protocol import Store

__all__ = [
    "InboxWatch",
    "PollingWatch",
    "SupportsInboxWatch",
    "WakeupWatch",
    "Wakeups",
    "watch_messages",
]


@runtime_checkable
class InboxWatch(Protocol):
    """An open watch on one run's inbox (from :meth:`SupportsInboxWatch.watch_inbox`).

    .. versionadded:: 0.2
    """

    async def changed(self) -> None:
        """Return once entries may have been posted since the watch opened or since the last return.

        A post is never missed: one that lands while nobody is waiting (between
        two calls) makes the next call return at once. Returns may be spurious
        (nothing new), so read the inbox from where you stopped and wait again.
        Blocks until then; cancellable. Call it from one task at a time.
        """
        ...


@runtime_checkable
class SupportsInboxWatch(Protocol):
    """A store that can wake a waiter when a run's inbox gets a message.

    Use :func:`watch_messages`, which takes any store with an inbox and polls
    for one without a watch. The memory, file and S3 stores have one.

    .. versionadded:: 0.2
    """

    def watch_inbox(self, run_id: str) -> contextlib.AbstractAsyncContextManager[InboxWatch]:
        """A watch on the run's inbox, open from entering the context to leaving it.

        Posts from this process and (for a store shared across processes) from
        others count from the moment it is entered. Leaving it releases what it
        holds (descriptors, files); a watch is used by one task.

        Raises:
            RunNotFoundError: no such run (on entering).
            InvalidRunIdError: ``run_id`` is not a valid run id.
        """
        ...


class PollingWatch:
    """A watch that only waits: :meth:`changed` returns every ``interval`` seconds.

    For stores that cannot tell a post from outside (every return may be
    spurious). :func:`watch_messages` uses it for stores without a watch.

    Args:
        interval: seconds between returns (positive, finite).

    Raises:
        ValueError: ``interval`` is not positive and finite.
    """

    def __init__(self, interval: float) -> None:
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"poll interval must be positive and finite, not {interval!r}")
        self.interval = interval

    async def changed(self) -> None:
        """Sleep ``interval`` seconds and return. Cancellable."""
        await anyio.sleep(self.interval)


@contextlib.asynccontextmanager
async def watch_messages(
    store: Store, run_id: str, *, poll_interval: float
) -> AsyncIterator[InboxWatch]:
    """A watch on the run's inbox: the store's own, or one polling every ``poll_interval`` s.

    A :class:`SupportsInboxWatch` store's watch is used as it is (``poll_interval``
    is then unused); for another store with an inbox, :meth:`InboxWatch.changed`
    sleeps ``poll_interval`` seconds and returns.

    Raises:
        InboxUnsupportedError: the store keeps no inbox.
        RunNotFoundError: no such run.
        InvalidRunIdError: ``run_id`` is not a valid run id.
        ValueError: ``poll_interval`` is not positive and finite.

    .. versionadded:: 0.2
    """
    polling = PollingWatch(poll_interval)  # checked for every store: callers pass one value
    if isinstance(store, SupportsInboxWatch):
        async with store.watch_inbox(run_id) as watch:
            yield watch
        return
    if not isinstance(store, SupportsInbox):
        raise InboxUnsupportedError("watch inbox", type_name(store))
    await store.read_run(run_id)  # the run must exist, as with a store's own watch
    yield polling


# --- for stores ---------------------------------------------------------------------


class Wakeups:
    """Posts counted per run, and the tasks waiting for one: one event loop's watches.

    A store calls :meth:`wake` after each post; a watch remembers the count
    it last saw and waits in :meth:`wait_past` until the count moves on.
    Counts only grow, so a post between two waits is never missed.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._events: dict[str, anyio.Event] = {}

    def count(self, run_id: str) -> int:
        """How many posts the run has had (since this object was made)."""
        return self._counts.get(run_id, 0)

    def wake(self, run_id: str) -> None:
        """Note a post to the run and wake whoever waits for one. Never blocks."""
        self._counts[run_id] = self.count(run_id) + 1
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()

    async def wait_past(self, run_id: str, seen: int) -> int:
        """Wait until the run's count is not ``seen``; return the new count. Cancellable."""
        if self.count(run_id) != seen:
            await anyio.lowlevel.checkpoint()  # a wait that need not wait still checkpoints
        while (count := self.count(run_id)) == seen:
            event = self._events.get(run_id)
            if event is None:
                event = self._events[run_id] = anyio.Event()
            await event.wait()
        return count


class WakeupWatch:
    """A watch on one run fed by a :class:`Wakeups` (the memory store's)."""

    def __init__(self, wakeups: Wakeups, run_id: str) -> None:
        self._wakeups = wakeups
        self._run_id = run_id
        self._seen = wakeups.count(run_id)

    async def changed(self) -> None:
        """See :meth:`InboxWatch.changed`."""
        self._seen = await self._wakeups.wait_past(self._run_id, self._seen)
