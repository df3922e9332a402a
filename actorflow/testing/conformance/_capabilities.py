"""Conformance: the optional capabilities, each tested only where the store offers it.

A store that implements a capability (``UnreadableLister``, ``ClaimInspector``,
``SealChecker``, ``SupportsBlobSync``, ``SharedLimits``, ``TimedQueueSlots``,
``RunVersions``) must
honour it; one that does not skips these tests.
"""

from __future__ import annotations

import time

import msgspec
import pytest

from actorflow.errors import RunNotFoundError, StorageError
from actorflow.storage import (
    ClaimInfo,
    ClaimInspector,
    Codec,
    QueueSlots,
    RunVersions,
    SealChecker,
    SharedLimits,
    Store,
    SupportsBlobSync,
    TimedQueueSlots,
    UnreadableLister,
)
from actorflow.testing.conformance._samples import manifest, snapshot, step

__all__ = ["CapabilityTests"]


def _offers(store: Store, capability: type) -> None:
    if not isinstance(store, capability):
        pytest.skip(f"the store is no {capability.__name__} (an optional capability)")


class CapabilityTests:
    """What a store offering an optional capability promises with it."""

    async def test_intact_runs_leave_nothing_unreadable(self, store: Store) -> None:
        _offers(store, UnreadableLister)
        assert isinstance(store, UnreadableLister)
        await store.create_run(manifest("a"))
        await store.append("a", [step(0)])
        await store.delete_run("a")  # a tombstone: a run still
        await store.create_run(manifest("b"))
        assert await store.list_unreadable() == []

    async def test_run_versions_name_every_run_and_change_with_its_manifest(
        self, store: Store
    ) -> None:
        _offers(store, RunVersions)
        assert isinstance(store, RunVersions)
        assert await store.list_run_versions() == {}
        await store.create_run(manifest("a"))
        await store.create_run(manifest("b"))
        first = await store.list_run_versions()
        assert set(first) == {"a", "b"}
        await store.update_run("a", lambda m: msgspec.structs.replace(m, phase="next"))
        changed = await store.list_run_versions()
        # a changed manifest never keeps its version: another one, or none yet ("")
        assert changed["a"] == "" or changed["a"] != first["a"]
        if changed["b"] and first["b"]:
            assert changed["b"] == first["b"]  # an unchanged one keeps it, if the store vouches
        await store.delete_run("b", tombstone=False)
        assert set(await store.list_run_versions()) == {"a"}
        await store.delete_run("a")  # a tombstone is a run still, as in list_runs
        assert set(await store.list_run_versions()) == {"a"}

    async def test_read_claim_names_the_last_owner_and_whether_it_lives(self, store: Store) -> None:
        _offers(store, ClaimInspector)
        assert isinstance(store, ClaimInspector)
        await store.create_run(manifest())
        assert await store.read_claim("run-1") == ClaimInfo(alive=False)
        lease = await store.claim("run-1", "me")
        held = await store.read_claim("run-1")
        assert (held.owner, held.alive) == ("me", True)
        assert held.expires is None or held.expires > time.time()  # a lease runs out later
        await store.release(lease)
        gone = await store.read_claim("run-1")
        assert (gone.owner, gone.alive) == ("me", False)  # whoever held it last, not alive
        with pytest.raises(RunNotFoundError):
            await store.read_claim("ghost")

    async def test_check_sealed_verifies_every_object_without_opening_it(
        self, store: Store
    ) -> None:
        _offers(store, SealChecker)
        assert isinstance(store, SealChecker)
        await store.create_run(manifest())
        ref = await store.put_blob("run-1", b"state" * 100)
        await store.append("run-1", [step(0), step(1, blob=ref), step(2)])
        await store.write_snapshot(snapshot("s1", 3))
        check = await store.check_sealed("run-1")
        assert (check.records, check.snapshots, check.blobs) == (3, 1, 1)
        assert check.other >= 1  # the manifest (and where there is one, the claim)
        assert check.problems == []
        codec = getattr(store, "codec", None)  # where the store says how it seals
        if isinstance(codec, Codec):
            everything = check.records + check.snapshots + check.blobs + check.other
            assert check.encrypted == (everything if codec.encrypted else 0)
        with pytest.raises(RunNotFoundError):
            await store.check_sealed("ghost")

    async def test_a_blob_put_unsynced_reads_back_and_syncs(self, store: Store) -> None:
        """``put_blob_unsynced`` stores like ``put_blob`` (one address per content);
        ``sync_blobs`` is idempotent and names a blob the run lacks."""
        _offers(store, SupportsBlobSync)
        assert isinstance(store, SupportsBlobSync)
        await store.create_run(manifest())
        ref = await store.put_blob_unsynced("run-1", b"chunk" * 100)
        assert ref == await store.put_blob("run-1", b"chunk" * 100)
        assert await store.get_blob("run-1", ref) == b"chunk" * 100
        await store.sync_blobs("run-1", [ref])
        await store.sync_blobs("run-1", [ref])
        await store.sync_blobs("run-1", [])
        assert ref in await store.list_blobs("run-1")
        await store.delete_blob("run-1", ref)
        with pytest.raises(StorageError):
            await store.sync_blobs("run-1", [ref])

    async def test_shared_limits_keep_a_sliding_minute_per_key(self, store: Store) -> None:
        _offers(store, SharedLimits)
        assert isinstance(store, SharedLimits)
        take = store.take_limit
        for i in range(3):
            assert await take("api", per_minute=3, tokens_per_minute=None, now=100.0 + i) == 0.0
        # the fourth waits until the first is a minute old; nothing is taken meanwhile
        assert await take("api", per_minute=3, tokens_per_minute=None, now=110.0) == 50.0
        assert await take("api", per_minute=3, tokens_per_minute=None, now=159.0) == 1.0
        assert await take("api", per_minute=3, tokens_per_minute=None, now=160.0) == 0.0
        # another key has a budget of its own
        assert await take("other", per_minute=1, tokens_per_minute=None, now=110.0) == 0.0

    async def test_shared_limits_count_spent_tokens(self, store: Store) -> None:
        _offers(store, SharedLimits)
        assert isinstance(store, SharedLimits)
        take = store.take_limit
        assert await take("llm", per_minute=None, tokens_per_minute=500, now=10.0) == 0.0
        await store.spend_limit_tokens("llm", 300, now=12.0)
        assert await take("llm", per_minute=None, tokens_per_minute=500, now=13.0) == 0.0
        await store.spend_limit_tokens("llm", 300, now=14.0)
        # 600 spent in the minute: the next waits until the first spend is a minute old
        assert await take("llm", per_minute=None, tokens_per_minute=500, now=20.0) == 52.0
        assert await take("llm", per_minute=None, tokens_per_minute=500, now=72.0) == 0.0

    async def test_shared_limits_hold_each_slot_once(self, store: Store) -> None:
        _offers(store, SharedLimits)
        assert isinstance(store, SharedLimits)
        first = await store.take_limit_slot("db", 2)
        second = await store.take_limit_slot("db", 2)
        assert first is not None
        assert second is not None
        assert await store.take_limit_slot("db", 2) is None  # both held
        assert await store.take_limit_slot("other", 1) is not None  # a key of its own
        store.release_limit_slot(first)
        again = await store.take_limit_slot("db", 2)
        assert again is not None
        store.release_limit_slot(again)
        store.release_limit_slot(second)

    async def test_a_timed_queue_slot_counts_until_its_end_once_released(
        self, store: Store
    ) -> None:
        _offers(store, TimedQueueSlots)
        assert isinstance(store, TimedQueueSlots)
        assert isinstance(store, QueueSlots)
        slot = await store.take_timed_queue_slot("q@rate", 1, "me", now=100.0, until=160.0)
        assert slot is not None
        assert await store.take_timed_queue_slot("q@rate", 1, "me", now=101.0, until=161.0) is None
        await store.release_queue_slot(slot)  # its worker stopped within the minute
        assert await store.take_timed_queue_slot("q@rate", 1, "me", now=159.0, until=219.0) is None
        again = await store.take_timed_queue_slot("q@rate", 1, "me", now=160.0, until=220.0)
        assert again is not None
        await store.release_queue_slot(again)
