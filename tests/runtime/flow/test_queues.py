"""Queues of submitted runs: declared caps, priority order, dedup keys, across workers.

Three workers on one file store, each with a store object of its own (so
each holds its own ``flock``s, as separate processes do), take queued runs
with priorities and dedup keys: every run finishes exactly once, the cap
holds across them all (the audit of entries and exits says how many ran at
once), and runs enter in priority order.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import AdoptionPolicy, Queue, Runtime
from actorflow.errors import (
    ConfigurationError,
    DedupKeyError,
    QueueNotDeclaredError,
)
from actorflow.storage import FileStore, MemoryStore, RunStatus
from actorflow.testing import FakeClock
from tests.runtime.flow import queue_flows
from tests.runtime.flow.queue_flows import Audited, Clocked

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store

CLOCK = FakeClock(1_800_000_000)
"""The clock ``Clocked`` runs read their start from (reset by the tests that use it)."""

FAST = AdoptionPolicy(poll_interval=0.02, recheck_interval=0.05, backoff=0.01, max_backoff=0.05)
DEADLINE = 120.0
"""A bound on a whole test: it turns a hang into a failure, it times nothing."""


@pytest.fixture(autouse=True)
def _fresh_audit() -> None:
    queue_flows.AUDIT.clear()


async def _result(rt: Runtime, run_id: str) -> object:
    """The run's result once a worker finished it (following it would keep workers off it)."""
    with anyio.fail_after(DEADLINE):
        while (await rt.store.read_run(run_id)).status is not RunStatus.COMPLETED:  # noqa: ASYNC110
            await anyio.sleep(0.01)  # a worker's task drives it: nothing to wait on
    return await rt.result(run_id)


def _most_at_once() -> int:
    running, most = 0, 0
    for kind, _, _ in queue_flows.AUDIT:
        running += 1 if kind == "enter" else -1
        most = max(most, running)
    return most


# --- declaration and bad input -------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"max_concurrent": 0}, {"max_concurrent": -1}, {"per_minute": 0}, {"per_minute": 1.5}],
)
def test_a_cap_or_rate_that_is_not_positive_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="Queue"):
        Queue("reports", **kwargs)  # type: ignore[arg-type]


def test_a_bad_queue_name_and_a_name_declared_twice_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"Queue\.name"):
        Queue("no spaces")
    with pytest.raises(ConfigurationError, match="once"):
        Runtime(store=MemoryStore(), queues=[Queue("a"), Queue("a")])


async def test_bad_submits_are_refused_before_anything_is_stored() -> None:
    store = MemoryStore()
    async with Runtime(store=store, queues=[Queue("reports", max_concurrent=1)]) as rt:
        with pytest.raises(QueueNotDeclaredError, match="'other' is not declared"):
            await rt.submit(Audited, 1, queue="other")
        with pytest.raises(DedupKeyError, match="non-empty string"):
            await rt.submit(Audited, 1, queue="reports", dedup_key=7)  # type: ignore[arg-type]
        with pytest.raises(DedupKeyError, match="run_id or dedup_key"):
            await rt.submit(Audited, 1, queue="reports", dedup_key="k", run_id="r1")
        with pytest.raises(ConfigurationError, match="priority"):
            await rt.submit(Audited, 1, queue="reports", priority="high")  # type: ignore[arg-type]
    assert await store.list_runs() == []


# --- dedup -----------------------------------------------------------------------


async def test_a_dedup_key_returns_the_unfinished_run_and_starts_a_new_one_after() -> None:
    store = MemoryStore()
    queues = [Queue("reports")]
    async with Runtime(store=store, queues=queues) as client:
        first = await client.submit(Audited, 1, queue="reports", dedup_key="daily")
        again = await client.submit(Audited, 2, queue="reports", dedup_key="daily")
        other = await client.submit(Audited, 3, queue="reports", dedup_key="weekly")
        assert again == first
        assert other != first
        stored = await store.read_run(first)
        assert (stored.queue, stored.priority, stored.dedup_key) == ("reports", 0, "daily")
    async with Runtime(store=store, queues=queues, adopt_orphans=FAST) as worker:
        assert await _result(worker, first) == 1
        assert await _result(worker, other) == 3
        later = await worker.submit(Audited, 4, queue="reports", dedup_key="daily")
        assert later != first
        assert await _result(worker, later) == 4
        assert await worker.submit(Audited, 5, queue="reports", dedup_key="daily") != later


async def test_a_worker_leaves_the_runs_of_a_queue_it_does_not_declare_alone() -> None:
    store = MemoryStore()
    async with Runtime(store=store, queues=[Queue("reports"), Queue("mail")]) as client:
        mail = await client.submit(Audited, 1, queue="mail")
        report = await client.submit(Audited, 2, queue="reports")
    async with Runtime(store=store, queues=[Queue("reports")], adopt_orphans=FAST) as worker:
        assert await _result(worker, report) == 2
        await worker.runs()  # a look or two later, the mail run still waits
    assert (await store.read_run(mail)).status is RunStatus.QUEUED


# --- many runs over three workers ---------------------------------------------------


async def _many(stores: list[Store], cap: int, runs: int) -> dict[str, int]:
    queues = [Queue("reports", max_concurrent=cap)]
    async with Runtime(store=stores[0], queues=queues) as client:
        priorities: dict[str, int] = {}
        for n in range(runs):
            priority = n % 5
            # every fourth submit repeats a key whose run is still queued
            key = f"k{n - n % 4 if n % 4 == 3 else n}"
            run_id = await client.submit(
                Audited, priority, queue="reports", priority=priority, dedup_key=key
            )
            if n % 4 != 3:
                priorities[run_id] = priority
            else:
                assert run_id in priorities
    async with contextlib.AsyncExitStack() as stack:
        workers = [
            await stack.enter_async_context(Runtime(store=store, queues=queues, adopt_orphans=FAST))
            for store in stores
        ]
        with anyio.fail_after(DEADLINE):
            for run_id in priorities:
                while (await stores[0].read_run(run_id)).status is not RunStatus.COMPLETED:
                    workers[0].adopt_now()
                    await anyio.sleep(0.02)  # workers' tasks drive them
    return priorities


@pytest.mark.slow
@pytest.mark.parametrize(("cap", "runs"), [(1, 200), (3, 1000)])
async def test_queued_runs_over_three_workers_finish_once_in_order_within_the_cap(
    tmp_path: Path, cap: int, runs: int
) -> None:
    stores: list[Store] = [FileStore(tmp_path / "store") for _ in range(3)]
    priorities = await _many(stores, cap, runs)
    entered = [(run_id, p) for kind, run_id, p in queue_flows.AUDIT if kind == "enter"]
    assert sorted(r for r, _ in entered) == sorted(priorities)  # each exactly once
    assert _most_at_once() <= cap
    order = [p for _, p in entered]
    # a run enters before every run of a lower priority, up to the runs beside it
    for i, p in enumerate(order):
        assert all(later <= p for later in order[i + cap :]), (i, order)


# --- per_minute ------------------------------------------------------------------------


async def test_per_minute_lets_no_more_runs_start_in_any_minute_of_the_clock() -> None:
    clock = FakeClock(1_800_000_000)
    store = MemoryStore()
    queues = [Queue("mail", per_minute=2)]
    async with Runtime(store=store, queues=queues, clock=clock, adopt_orphans=FAST) as worker:
        run_ids = [await worker.submit(Audited, n, queue="mail") for n in range(5)]
        for done in (2, 4, 5):
            with anyio.fail_after(DEADLINE):
                while (  # noqa: ASYNC110
                    sum([(await store.read_run(r)).status is RunStatus.COMPLETED for r in run_ids])
                    < done
                ):
                    await anyio.sleep(0.01)  # the worker's tasks drive them
            queue_flows.AUDIT.append(("minute", "", 0))  # the clock moves on from here
            clock.advance(61)
            worker.adopt_now()
    starts_per_minute = [0]
    for kind, _, _ in queue_flows.AUDIT:
        if kind == "minute":
            starts_per_minute.append(0)
        elif kind == "enter":
            starts_per_minute[-1] += 1
    assert starts_per_minute == [2, 2, 1, 0]


async def test_a_per_minute_slot_counts_to_its_minute_after_its_worker_is_gone(
    tmp_path: Path,
) -> None:
    # the first worker starts a run, then stops (its flock goes with it) within the minute
    global CLOCK
    CLOCK = clock = FakeClock(1_800_000_000)
    queue_flows.STARTS.clear()
    queues = [Queue("mail", per_minute=1)]
    path = tmp_path / "store"
    async with Runtime(store=FileStore(path), queues=queues, clock=clock, adopt_orphans=FAST) as w1:
        first = await w1.submit(Clocked, 1, queue="mail")
        await _result(w1, first)
    async with Runtime(store=FileStore(path), queues=queues, clock=clock, adopt_orphans=FAST) as w2:
        second = await w2.submit(Clocked, 2, queue="mail")
        with anyio.fail_after(DEADLINE):
            # the clock moves a second at a time; the worker looks at each
            while (await w2.store.read_run(second)).status is not RunStatus.COMPLETED:
                clock.advance(1)
                w2.adopt_now()
                await anyio.sleep(0.05)  # the worker's tasks take their turn
    (_, started_first), (_, started_second) = queue_flows.STARTS
    assert started_second - started_first >= 60.0
