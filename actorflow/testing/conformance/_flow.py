"""Conformance: queue slots and schedules, each tested only where the store offers it."""

from __future__ import annotations

import pytest

from actorflow.errors import ScheduleNotFoundError
from actorflow.storage import (
    QueueSlots,
    Schedule,
    ScheduleProgress,
    ScheduleStore,
    Store,
    UnreadableLister,
)

__all__ = ["FlowControlTests"]


def _offers(store: Store, capability: type) -> None:
    if not isinstance(store, capability):
        pytest.skip(f"the store is no {capability.__name__} (an optional capability)")


def _schedule(schedule_id: str = "nightly", **changes: object) -> Schedule:
    fields: dict[str, object] = {
        "schedule_id": schedule_id,
        "workflow": "tests.Flow",
        "input": b"\x01",
        "every": 60.0,
        "anchor": 1_000.0,
    }
    fields.update(changes)
    return Schedule(**fields)  # type: ignore[arg-type]


class FlowControlTests:
    """What a store offering ``QueueSlots`` or ``ScheduleStore`` promises with it."""

    async def test_queue_slots_are_held_until_released(self, store: Store) -> None:
        _offers(store, QueueSlots)
        assert isinstance(store, QueueSlots)
        first = await store.take_queue_slot("reports", 2, "a")
        second = await store.take_queue_slot("reports", 2, "b")
        assert first is not None
        assert second is not None
        assert first.index != second.index
        assert await store.take_queue_slot("reports", 2, "c") is None  # both held
        assert await store.take_queue_slot("mail", 1, "c") is not None  # another queue's own
        await store.release_queue_slot(first)
        await store.release_queue_slot(first)  # idempotent
        again = await store.take_queue_slot("reports", 2, "c")
        assert again is not None
        assert again.index == first.index

    async def test_schedules_are_stored_replaced_listed_and_deleted(self, store: Store) -> None:
        _offers(store, ScheduleStore)
        assert isinstance(store, ScheduleStore)
        assert await store.list_schedules() == []
        with pytest.raises(ScheduleNotFoundError):
            await store.read_schedule("nightly")
        await store.put_schedule(_schedule())
        await store.put_schedule(_schedule("hourly", cron="0 * * * *", every=None))
        assert await store.read_schedule("nightly") == _schedule()
        await store.put_schedule(_schedule(paused=True))
        assert (await store.read_schedule("nightly")).paused
        assert [s.schedule_id for s in await store.list_schedules()] == ["hourly", "nightly"]
        await store.delete_schedule("nightly")
        with pytest.raises(ScheduleNotFoundError):
            await store.delete_schedule("nightly")
        assert [s.schedule_id for s in await store.list_schedules()] == ["hourly"]

    async def test_schedule_progress_is_kept_apart_and_goes_with_its_schedule(
        self, store: Store
    ) -> None:
        _offers(store, ScheduleStore)
        assert isinstance(store, ScheduleStore)
        await store.put_schedule(_schedule())
        assert await store.read_schedule_progress("nightly") is None
        progress = ScheduleProgress(schedule_id="nightly", last_tick=1_060.0, last_run="r")
        await store.put_schedule_progress(progress)
        assert await store.read_schedule_progress("nightly") == progress
        await store.put_schedule(_schedule(paused=True))  # a definition leaves progress be
        assert await store.read_schedule_progress("nightly") == progress
        await store.delete_schedule("nightly")
        assert await store.read_schedule_progress("nightly") is None

    async def test_schedules_and_slots_are_no_unreadable_runs(self, store: Store) -> None:
        _offers(store, UnreadableLister)
        assert isinstance(store, UnreadableLister)
        if isinstance(store, ScheduleStore):
            await store.put_schedule(_schedule())
            progress = ScheduleProgress(schedule_id="nightly", last_tick=1_060.0, last_run="r")
            await store.put_schedule_progress(progress)
        if isinstance(store, QueueSlots):
            assert await store.take_queue_slot("reports", 1, "a") is not None
        assert await store.list_runs() == []
        assert await store.list_unreadable() == []
