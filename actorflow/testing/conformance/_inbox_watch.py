"""Conformance: waking a run's watcher on a post (``SupportsInboxWatch``), where offered.

With no post ``changed()`` waits; a post wakes a waiting ``changed()``; one
made while nobody waits makes the next call return; the runtime's loop gets
every post; a watch is released on leaving; posting with nobody watching
works; unknown runs are refused.
"""

from __future__ import annotations

from typing import Protocol, cast

import anyio
import pytest

from actorflow.errors import InvalidRunIdError, RunNotFoundError
from actorflow.storage import InboxEntry, InboxWatch, Store, SupportsInbox, SupportsInboxWatch
from actorflow.testing.conformance._samples import manifest

__all__ = ["InboxWatchTests"]

_BOUND = 10.0
"""Seconds a wake may take before a test fails: generous, for polling stores on slow machines."""

_QUIET = 0.1
"""Seconds a watch with no posts is watched not returning (asserting an absence)."""


class _Both(SupportsInbox, SupportsInboxWatch, Protocol):
    """A store with an inbox and a watch on it."""


def _watching(store: Store) -> _Both:
    if not isinstance(store, SupportsInboxWatch) or not isinstance(store, SupportsInbox):
        pytest.skip("the store cannot watch an inbox (SupportsInboxWatch, an optional capability)")
    return cast("_Both", store)


async def _post(store: SupportsInbox, entry_id: str, run_id: str = "run-1") -> InboxEntry:
    return await store.post(run_id, entry_id=entry_id, type="Msg", payload=b"x")


class InboxWatchTests:
    """What a store with an inbox watch promises: no post is missed, no wait is busy.

    Two tests, each a sequence of steps on one run: every test costs a store
    (on S3, a bucket prefix and a connection).
    """

    async def test_a_watch_waits_for_posts_and_misses_none(self, store: Store) -> None:
        both = _watching(store)
        await store.create_run(manifest())
        async with both.watch_inbox("run-1") as watch:
            with anyio.move_on_after(_QUIET) as quiet:
                await watch.changed()
            assert quiet.cancelled_caught, "changed() returned though nothing was posted"

            woken = anyio.Event()

            async def wait() -> None:
                await watch.changed()
                woken.set()

            with anyio.fail_after(_BOUND):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    await anyio.wait_all_tasks_blocked()  # the waiter is waiting
                    await _post(both, "m0")  # and a post wakes it
                    await woken.wait()

            await _post(both, "m1")  # while nobody waits: the next wait returns
            with anyio.fail_after(_BOUND):
                await watch.changed()

            await _owner_loop(both, watch, start=2, count=3)

    async def test_watches_are_released_and_posts_need_none(self, store: Store) -> None:
        both = _watching(store)
        with pytest.raises(RunNotFoundError):
            async with both.watch_inbox("ghost"):
                pass
        with pytest.raises(InvalidRunIdError):
            async with both.watch_inbox("../escape"):
                pass
        await store.create_run(manifest())
        async with both.watch_inbox("run-1"):
            pass
        await _post(both, "nobody-watches")
        async with both.watch_inbox("run-1") as watch:  # watched again after a watch left
            await _post(both, "watched")
            with anyio.fail_after(_BOUND):
                await watch.changed()
        posted = [e.entry_id for e in await both.read_inbox("run-1")]
        assert posted == ["nobody-watches", "watched"]
        await store.delete_run("run-1", tombstone=False)  # nothing a watch left stops it
        with pytest.raises(RunNotFoundError):
            await _post(both, "late")
        await store.create_run(manifest())  # and the run id can be used again
        assert (await _post(both, "m0")).seq == 0


async def _owner_loop(both: _Both, watch: InboxWatch, *, start: int, count: int) -> None:
    """The runtime's loop (read from the cursor, wait) against a poster: it gets every post."""
    got: list[InboxEntry] = []
    cursor = start

    async def owner() -> None:
        nonlocal cursor
        while len(got) < count:
            entries = await both.read_inbox("run-1", cursor)
            got.extend(entries)
            cursor += len(entries)
            if len(got) < count:
                await watch.changed()

    with anyio.fail_after(_BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner)
            for i in range(count):
                await anyio.wait_all_tasks_blocked()  # each post finds the owner waiting
                await _post(both, f"loop{i}")
    assert [e.entry_id for e in got] == [f"loop{i}" for i in range(count)]
