"""``watch_messages`` on any store: the store's own watch, else a polling one."""

from __future__ import annotations

from typing import cast

import anyio
import pytest

from actorflow.errors import InboxUnsupportedError, RunNotFoundError
from actorflow.storage import (
    InboxWatch,
    MemoryStore,
    Store,
    SupportsInboxWatch,
    watch_messages,
)
from actorflow.storage._inbox_watch import PollingWatch
from actorflow.testing.conformance._samples import manifest


class _NoWatch(MemoryStore):
    """A store with an inbox but no watch (as a third party's might be)."""

    watch_inbox = None  # type: ignore[assignment]  # None: not a SupportsInboxWatch


class _NoInbox:
    """A store written before inboxes existed (only what these tests touch)."""


async def test_a_store_with_a_watch_is_watched_by_it() -> None:
    store = MemoryStore()
    assert isinstance(store, SupportsInboxWatch)
    await store.create_run(manifest())
    async with watch_messages(store, "run-1", poll_interval=3600) as watch:
        assert isinstance(watch, InboxWatch)
        assert not isinstance(watch, PollingWatch)
        await store.post("run-1", entry_id="e", type="T", payload=b"")
        with anyio.fail_after(5):
            await watch.changed()  # at once, though the poll interval is an hour


async def test_a_store_without_a_watch_is_polled() -> None:
    store = _NoWatch()
    assert not isinstance(cast("object", store), SupportsInboxWatch)
    await store.create_run(manifest())
    async with watch_messages(store, "run-1", poll_interval=0.01) as watch:
        assert isinstance(watch, PollingWatch)
        assert watch.interval == 0.01
        with anyio.fail_after(5):
            await watch.changed()  # returns after the interval, posted or not
    with pytest.raises(RunNotFoundError):
        async with watch_messages(store, "ghost", poll_interval=0.01):
            pass


async def test_a_store_without_an_inbox_or_a_bad_interval_is_refused() -> None:
    with pytest.raises(InboxUnsupportedError, match="watch inbox"):
        async with watch_messages(cast("Store", _NoInbox()), "run-1", poll_interval=1):
            pass
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="poll interval"):
            async with watch_messages(MemoryStore(), "run-1", poll_interval=bad):
                pass
