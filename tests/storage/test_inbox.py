"""The inbox helpers on any store: a store without an inbox says so by name."""

from __future__ import annotations

from typing import cast

import pytest

from actorflow.errors import InboxUnsupportedError, StorageError
from actorflow.storage import MemoryStore, Store, SupportsInbox, post_message, read_messages
from actorflow.testing.conformance._samples import manifest


class _NoInbox:
    """A store written before inboxes existed (only what these tests touch)."""


async def test_a_store_without_an_inbox_is_refused_by_name() -> None:
    store = cast("Store", _NoInbox())
    with pytest.raises(InboxUnsupportedError, match="_NoInbox keeps no inbox") as info:
        await post_message(store, "run-1", entry_id="e", type="T", payload=b"")
    assert isinstance(info.value, StorageError)
    with pytest.raises(InboxUnsupportedError, match="read inbox"):
        await read_messages(store, "run-1")


async def test_the_helpers_reach_a_store_with_an_inbox() -> None:
    store = MemoryStore()
    assert isinstance(store, SupportsInbox)
    await store.create_run(manifest())
    entry = await post_message(store, "run-1", entry_id="e", type="T", payload=b"p", sender="me")
    assert await read_messages(store, "run-1") == [entry]
