"""Conformance: a run's inbox (``SupportsInbox``), tested where the store offers one.

Order, reading from a place, idempotent retries, concurrent posters,
hostile ids, unknown runs, deletion, and (where the suite is told how to open
a store's data again, see :meth:`InboxTests.reopen`) survival across closing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow.errors import InvalidRunIdError, RunNotFoundError
from actorflow.storage import InboxChecker, InboxEntry, Store, SupportsInbox
from actorflow.testing.conformance._samples import manifest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["InboxTests"]

_POSTERS = 8

HOSTILE_IDS = (
    "a/b/../../c",
    "..",
    "/",
    "nul\x00inside",
    "x" * 10_000,
    "ünïcødé ☃ 𝄞",
    "",
    "inbox/00000000000000000000.msg",
)
"""Entry ids no store may use as names as they are."""


def _inbox(store: Store) -> SupportsInbox:
    if not isinstance(store, SupportsInbox):
        pytest.skip("the store keeps no inbox (SupportsInbox, an optional capability)")
    return store


async def _post(inbox: SupportsInbox, entry_id: str, *, run_id: str = "run-1") -> InboxEntry:
    return await inbox.post(
        run_id, entry_id=entry_id, type="Msg", payload=entry_id.encode(), sender="tests"
    )


class InboxTests:
    """What a store with an inbox promises: ordered, durable, idempotent entries."""

    @pytest.fixture
    def reopen(self) -> Callable[[Store], Store] | None:
        """Override it: a function opening a store's data again as a new store, or None.

        The new store stands for another process that opens the same data (a
        folder, a bucket prefix); the suite closes it. ``None`` (the default,
        and right for a store whose data lives only as long as the object)
        skips the tests that need it.
        """
        return None

    @pytest.fixture
    def damage_inbox_entry(self) -> Callable[[Store, str, int], Awaitable[None]] | None:
        """Override it: an async function damaging entry ``seq`` of a run's stored inbox.

        Called as ``await damage(store, run_id, seq)``; it should change the
        stored bytes as a disk error would (flip a byte of the entry's file or
        object). ``None`` (the default) skips the tests that need it.

        .. versionadded:: 0.4
        """
        return None

    async def test_posts_take_seqs_in_order_and_read_back(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        before = time.time()
        posted = [await _post(inbox, f"m{i}") for i in range(5)]
        assert [e.seq for e in posted] == [0, 1, 2, 3, 4]
        assert await inbox.read_inbox("run-1") == posted
        first = posted[0]
        assert (first.entry_id, first.type, first.payload, first.sender) == (
            "m0",
            "Msg",
            b"m0",
            "tests",
        )
        assert first.sent >= before - 1  # a wall clock: only roughly comparable

    async def test_read_starts_at_a_seq(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        posted = [await _post(inbox, f"m{i}") for i in range(4)]
        assert await inbox.read_inbox("run-1", 2) == posted[2:]
        assert await inbox.read_inbox("run-1", 4) == []
        assert await inbox.read_inbox("run-1", 100) == []
        assert await inbox.read_inbox("run-1", 1) == posted[1:]

    async def test_an_empty_inbox_reads_as_nothing(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        assert await inbox.read_inbox("run-1") == []

    async def test_posting_an_id_again_returns_its_entry_and_adds_nothing(
        self, store: Store
    ) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        first = await _post(inbox, "once")
        await _post(inbox, "other")
        again = await inbox.post("run-1", entry_id="once", type="Msg", payload=b"changed")
        assert again == first  # the stored entry, not the retry's payload
        assert [e.entry_id for e in await inbox.read_inbox("run-1")] == ["once", "other"]

    async def test_concurrent_posters_get_distinct_contiguous_seqs(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        posted: list[InboxEntry] = []

        async def poster(i: int) -> None:
            posted.append(await _post(inbox, f"p{i}"))

        # eight race for the first seq: enough to collide, and each collision
        # costs a round trip to the store (a conditional create)
        async with anyio.create_task_group() as tg:
            for i in range(_POSTERS):
                tg.start_soon(poster, i)
        assert sorted(e.seq for e in posted) == list(range(_POSTERS))
        stored = await inbox.read_inbox("run-1")
        assert stored == sorted(posted, key=lambda e: e.seq)

    async def test_concurrent_posts_of_one_id_store_it_once(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        results: list[InboxEntry] = []

        async def poster() -> None:
            results.append(await _post(inbox, "same"))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(poster)
        stored = await inbox.read_inbox("run-1")
        assert [e.entry_id for e in stored] == ["same"]  # duplicates, if any, are not read
        assert all(r.entry_id == "same" for r in results)

    async def test_hostile_ids_and_types_round_trip(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest())
        posted = [
            await inbox.post("run-1", entry_id=hostile, type=hostile, payload=b"\x00\xff")
            for hostile in HOSTILE_IDS
        ]
        assert [e.seq for e in posted] == list(range(len(HOSTILE_IDS)))
        stored = await inbox.read_inbox("run-1")
        assert [(e.entry_id, e.type) for e in stored] == [(h, h) for h in HOSTILE_IDS]
        for hostile, entry in zip(HOSTILE_IDS, posted, strict=True):  # each one retried
            assert await inbox.post("run-1", entry_id=hostile, type="T", payload=b"") == entry
        assert len(await inbox.read_inbox("run-1")) == len(HOSTILE_IDS)

    async def test_inboxes_of_runs_are_apart(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest("a"))
        await store.create_run(manifest("b"))
        await _post(inbox, "m", run_id="a")
        only_b = await _post(inbox, "m", run_id="b")  # the same id in another run
        assert only_b.seq == 0
        assert [e.payload for e in await inbox.read_inbox("b")] == [b"m"]

    async def test_unknown_runs_and_bad_ids_are_refused(self, store: Store) -> None:
        inbox = _inbox(store)
        with pytest.raises(RunNotFoundError):
            await _post(inbox, "m", run_id="ghost")
        with pytest.raises(RunNotFoundError):
            await inbox.read_inbox("ghost")
        with pytest.raises(InvalidRunIdError):
            await _post(inbox, "m", run_id="../escape")
        with pytest.raises(InvalidRunIdError):
            await inbox.read_inbox("a/b")

    async def test_deleting_a_run_deletes_its_inbox(self, store: Store) -> None:
        inbox = _inbox(store)
        await store.create_run(manifest("a"))
        await _post(inbox, "m0", run_id="a")
        await _post(inbox, "m1", run_id="a")
        await store.delete_run("a")  # a tombstone keeps the run, not its messages
        assert await inbox.read_inbox("a") == []
        again = await _post(inbox, "m1", run_id="a")
        assert again.seq == 0
        await store.delete_run("a", tombstone=False)
        with pytest.raises(RunNotFoundError):
            await inbox.read_inbox("a")

    async def test_entries_survive_closing_the_store(
        self, store: Store, reopen: Callable[[Store], Store] | None
    ) -> None:
        inbox = _inbox(store)
        if reopen is None:
            pytest.skip("the suite was given no `reopen` for this store")
        await store.create_run(manifest())
        posted = [await _post(inbox, f"m{i}") for i in range(3)]
        await store.aclose()
        opened = reopen(store)
        try:
            again = _inbox(opened)
            assert await again.read_inbox("run-1") == posted
            assert await again.read_inbox("run-1", 2) == posted[2:]
            assert await _post(again, "m1") == posted[1]  # its id is known there too
            assert (await _post(again, "m3")).seq == 3  # and where the inbox ends
        finally:
            await opened.aclose()

    async def test_a_damaged_entry_is_skipped_and_the_later_ones_are_read(
        self,
        store: Store,
        damage_inbox_entry: Callable[[Store, str, int], Awaitable[None]] | None,
    ) -> None:
        inbox = _inbox(store)
        if damage_inbox_entry is None:
            pytest.skip("the suite was given no `damage_inbox_entry` for this store")
        await store.create_run(manifest())
        posted = [await _post(inbox, f"m{i}") for i in range(3)]
        await damage_inbox_entry(store, "run-1", 1)
        assert await inbox.read_inbox("run-1") == [posted[0], posted[2]]
        assert await inbox.read_inbox("run-1", 1) == [posted[2]]
        later = await _post(inbox, "m3")
        assert later.seq == 3  # the damaged entry's seq stays taken
        assert await inbox.read_inbox("run-1", 2) == [posted[2], later]
        if isinstance(store, InboxChecker):
            check = await store.check_inbox("run-1")
            assert check.entries == 4
            [(location, _cause)] = check.damaged
            assert location  # where it is, as the store names it
