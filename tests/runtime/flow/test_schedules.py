"""Schedules: declared once, each tick's run started exactly once by whichever worker looks.

Time is a ``FakeClock`` the test moves; the workers' polls are real but
short, and ``adopt_now`` makes them look at once.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import AdoptionPolicy, Runtime
from actorflow.errors import (
    ConfigurationError,
    CronExpressionError,
    RunNotFoundError,
    ScheduleNotFoundError,
)
from actorflow.runtime.workflow._schedules import due_ticks, next_tick, tick_run_id
from actorflow.storage import FileStore, MemoryStore, RunStatus, Schedule
from actorflow.testing import FakeClock
from tests.runtime.flow import queue_flows
from tests.runtime.flow.queue_flows import Audited

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store

FAST = AdoptionPolicy(poll_interval=0.02, recheck_interval=0.05, backoff=0.01, max_backoff=0.05)
DEADLINE = 60.0
"""A bound on a whole test: it turns a hang into a failure, it times nothing."""
START = 1_800_000_000.0
"""A fake time that is a whole number of five minutes since the epoch."""
FIVE = datetime.timedelta(minutes=5)


@pytest.fixture(autouse=True)
def _fresh_audit() -> None:
    queue_flows.AUDIT.clear()


# --- declaration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"cron": "*/5 * * *"}, CronExpressionError),
        ({"cron": "61 * * * *"}, CronExpressionError),
        ({}, CronExpressionError),
        ({"cron": "* * * * *", "every": FIVE}, CronExpressionError),
        ({"every": datetime.timedelta(0)}, CronExpressionError),
        ({"every": FIVE, "catch_up": "some"}, ConfigurationError),
        ({"every": FIVE, "timezone": "Mars/Olympus"}, ConfigurationError),
        ({"every": FIVE, "schedule_id": "no spaces"}, ConfigurationError),
    ],
)
async def test_bad_timing_is_refused_before_anything_is_stored(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    store = MemoryStore()
    options: dict[str, object] = {"schedule_id": "s"}
    options.update(kwargs)
    async with Runtime(store=store) as rt:
        with pytest.raises(error):
            await rt.schedule(Audited, 1, **options)  # type: ignore[arg-type]
    assert await store.list_schedules() == []


async def test_pause_resume_delete_and_the_listing_with_next_and_last_ticks() -> None:
    clock = FakeClock(START)
    store = MemoryStore()
    async with Runtime(store=store, clock=clock) as rt:
        info = await rt.schedule(Audited, 1, schedule_id="s", every=FIVE)
        assert info.next_tick == START + 300
        assert info.last_tick is None
        assert (await rt.schedules.pause("s")).schedule.paused
        [listed] = await rt.schedules.list()
        assert listed.next_tick is None  # paused
        again = await rt.schedule(Audited, 2, schedule_id="s", every=FIVE)
        assert again.schedule.paused  # a declaration keeps the pause
        assert not (await rt.schedules.resume("s")).schedule.paused
        await rt.schedules.delete("s")
        assert await rt.schedules.list() == []
        with pytest.raises(ScheduleNotFoundError):
            await rt.schedules.pause("s")


# --- which ticks are due ---------------------------------------------------------------


def _every(catch_up: str) -> Schedule:
    return Schedule(
        schedule_id="s",
        workflow="w",
        every=300.0,
        anchor=START,
        catch_up=catch_up,  # type: ignore[arg-type]
    )


def test_catch_up_decides_what_becomes_of_missed_ticks() -> None:
    hour_later = START + 3600 + 10
    ticks, newest = due_ticks(_every("all"), START, hour_later)
    assert ticks == [START + 300 * k for k in range(1, 13)]
    assert newest == START + 3600
    assert due_ticks(_every("latest"), START, hour_later) == ([START + 3600], START + 3600)
    # skip: the newest tick is still on time, within the grace...
    assert due_ticks(_every("skip"), START, hour_later) == ([START + 3600], START + 3600)
    # ... but not two minutes late: noted as looked at, not started
    assert due_ticks(_every("skip"), START, START + 3600 + 120) == ([], START + 3600)
    assert due_ticks(_every("all"), START + 3600, hour_later) == ([], None)  # nothing new


def test_a_cron_schedule_ticks_in_its_timezone() -> None:
    schedule = Schedule(
        schedule_id="s", workflow="w", cron="0 9 * * *", timezone="Europe/Berlin", anchor=START
    )
    tick = next_tick(schedule, START)
    assert tick is not None
    berlin = datetime.datetime.fromtimestamp(tick, datetime.UTC).astimezone(
        datetime.timezone(datetime.timedelta(hours=1))  # January: CET
    )
    assert (berlin.hour, berlin.minute) == (9, 0)


# --- workers start each tick's run once ------------------------------------------------


async def _completed(store: Store, run_ids: list[str]) -> None:
    with anyio.fail_after(DEADLINE):
        for run_id in run_ids:
            while True:
                try:
                    if (await store.read_run(run_id)).status is RunStatus.COMPLETED:
                        break
                except RunNotFoundError:  # not created yet
                    pass
                await anyio.sleep(0.01)  # workers' tasks create and drive it


@pytest.mark.parametrize("catch_up", ["all", "skip"])
async def test_three_workers_over_a_simulated_hour_start_each_tick_once(
    tmp_path: Path, catch_up: str
) -> None:
    clock = FakeClock(START)
    stores: list[Store] = [FileStore(tmp_path / "store") for _ in range(3)]
    async with Runtime(store=stores[0], clock=clock) as client:
        await client.schedule(Audited, 7, schedule_id="five", every=FIVE, catch_up=catch_up)  # type: ignore[arg-type]
    async with contextlib.AsyncExitStack() as stack:
        workers = [
            await stack.enter_async_context(Runtime(store=s, clock=clock, adopt_orphans=FAST))
            for s in stores
        ]
        expected = [tick_run_id("five", START)]
        await _completed(stores[0], expected)
        for minute in range(1, 61):
            clock.advance(60)
            for worker in workers:
                worker.adopt_now()
            if minute % 5 == 0:
                expected.append(tick_run_id("five", START + 60 * minute))
                await _completed(stores[0], expected[-1:])
        [info] = await workers[0].schedules.list()
    scheduled = sorted(m.run_id for m in await stores[0].list_runs() if m.schedule == "five")
    assert scheduled == sorted(expected)
    entered = [run_id for kind, run_id, _ in queue_flows.AUDIT if kind == "enter"]
    assert sorted(entered) == sorted(expected)  # each started once
    assert info.last_tick == START + 3600
    assert info.last_run == expected[-1]
    assert info.next_tick == START + 3900


async def test_a_paused_schedule_starts_nothing_and_resumes_from_now() -> None:
    clock = FakeClock(START)
    store = MemoryStore()
    async with Runtime(store=store, clock=clock, adopt_orphans=FAST) as worker:
        await worker.schedule(Audited, 1, schedule_id="s", every=FIVE, catch_up="all")
        await _completed(store, [tick_run_id("s", START)])
        await worker.schedules.pause("s")
        clock.advance(FIVE * 3)
        worker.adopt_now()
        await worker.schedules.resume("s")
        clock.advance(FIVE)
        worker.adopt_now()
        await _completed(store, [tick_run_id("s", START + 1200)])
    runs = sorted(m.run_id for m in await store.list_runs())
    # the ticks missed while paused are passed over, even under catch_up="all"
    assert runs == [tick_run_id("s", START), tick_run_id("s", START + 1200)]
