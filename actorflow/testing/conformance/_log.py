"""Conformance: the decision log (append, read back, truncate) under concurrent writers."""

from __future__ import annotations

import anyio
import pytest

from actorflow.errors import (
    EncodingError,
    LogPrunedError,
    RunNotFoundError,
)
from actorflow.storage import DecisionRecord, EventRecord, StepRecord, Store
from actorflow.testing.conformance._samples import manifest, step

__all__ = ["LogTests"]


class LogTests:
    """The log: appends in order at absolute positions, whole or not at all."""

    async def test_append_returns_the_new_length_and_reads_back_in_order(
        self, store: Store
    ) -> None:
        await store.create_run(manifest())
        assert await store.log_length("run-1") == 0
        assert await store.append("run-1", [step(0), step(1)]) == 2
        decision = DecisionRecord(step_id="main/2", agent="lead", type="plan", alternatives=("a",))
        assert await store.append("run-1", [decision]) == 3
        assert await store.read_log("run-1") == [step(0), step(1), decision]
        assert await store.read_log("run-1", 2) == [decision]
        assert await store.read_log("run-1", 3) == []
        assert await store.log_length("run-1") == 3

    async def test_append_to_an_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.append("nope", [step(0)])

    async def test_empty_append_changes_nothing(self, store: Store) -> None:
        await store.create_run(manifest())
        assert await store.append("run-1", []) == 0

    async def test_concurrent_appenders_each_get_a_contiguous_range(self, store: Store) -> None:
        await store.create_run(manifest())
        ends: list[int] = []

        async def writer(w: int) -> None:
            for i in range(5):
                ends.append(
                    await store.append("run-1", [step(w * 100 + i), step(w * 100 + i + 50)])
                )

        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, w)
        log = await store.read_log("run-1")
        assert len(log) == 80
        assert sorted(ends) == list(range(2, 81, 2))
        for end in ends:  # each append's two records are adjacent
            first, second = log[end - 2], log[end - 1]
            assert isinstance(first, StepRecord)
            assert isinstance(second, StepRecord)
            assert int(second.step_id.split("/")[1]) == int(first.step_id.split("/")[1]) + 50

    async def test_truncate_before_keeps_absolute_positions(self, store: Store) -> None:
        await store.create_run(manifest())
        await store.append("run-1", [step(i) for i in range(10)])
        dropped = await store.truncate_log_before("run-1", 6)
        assert 0 <= dropped <= 6
        assert await store.log_length("run-1") == 10
        assert await store.read_log("run-1", 6) == [step(i) for i in range(6, 10)]
        assert await store.append("run-1", [step(10)]) == 11
        assert (await store.read_log("run-1", 10)) == [step(10)]

    async def test_reading_below_what_was_pruned_says_where_the_log_starts(
        self, store: Store
    ) -> None:
        await store.create_run(manifest())
        await store.append("run-1", [step(i) for i in range(10)])
        dropped = await store.truncate_log_before("run-1", 6)
        if dropped == 0:
            assert len(await store.read_log("run-1")) == 10  # a store may keep them all
            return
        with pytest.raises(LogPrunedError) as info:
            await store.read_log("run-1")
        assert info.value.start == 0
        assert dropped == info.value.first <= 6
        assert await store.read_log("run-1", info.value.first) == [
            step(i) for i in range(info.value.first, 10)
        ]

    async def test_non_encodable_record_is_an_encoding_error_and_appends_nothing(
        self, store: Store
    ) -> None:
        await store.create_run(manifest())
        bad = EventRecord(kind="x", data=object())  # type: ignore[arg-type]
        with pytest.raises(EncodingError):
            await store.append("run-1", [step(0), bad])
        assert await store.log_length("run-1") == 0
