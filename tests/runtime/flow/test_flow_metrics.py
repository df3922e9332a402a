"""Flow-control numbers a user can read: each limit's waits, each queue's depth, waits and cap."""

from __future__ import annotations

from actorflow import Limit, Queue, Runtime
from actorflow.runtime.reading import QueueStats, queue_stats
from actorflow.storage import MemoryStore
from actorflow.testing import FakeClock
from tests.runtime.flow import test_limits
from tests.runtime.flow.queue_flows import Audited
from tests.runtime.flow.test_limits import Calls, Fan, FanOut


async def test_limit_stats_keep_the_longest_and_mean_wait() -> None:
    clock = FakeClock()
    test_limits.calls = Calls(clock)
    limits = [Limit("metered", per_minute=2)]
    async with Runtime(store=MemoryStore(), limits=limits, clock=clock) as runtime:
        # 5 asks in turn, 2 a minute: the third waits a minute, the fifth another
        await runtime.run(FanOut, Fan("Metered", 1, 5))
        stats = runtime.limit_stats()["metered"]
    assert stats.waited == 2
    assert stats.wait_seconds == 120.0
    assert stats.longest_wait == 60.0
    assert stats.mean_wait == 60.0
    assert stats.queued == 0


async def test_queue_stats_give_depth_waits_and_caps() -> None:
    store = MemoryStore()
    queues = [Queue("reports", max_concurrent=2, per_minute=30), Queue("idle")]
    async with Runtime(store=store, queues=queues) as client:
        first = await client.submit(Audited, 1, queue="reports")
        second = await client.submit(Audited, 2, queue="reports")
        stats = await client.queue_stats()
        created = [(await store.read_run(r)).created for r in (first, second)]
    assert stats["reports"].queued == 2
    assert stats["reports"].running == 0
    assert stats["reports"].max_concurrent == 2
    assert stats["reports"].per_minute == 30
    assert stats["reports"].oldest_wait >= stats["reports"].mean_wait >= 0.0
    assert stats["idle"] == QueueStats(name="idle", declared=True)
    # waits to a given time; a reader not given the declarations sees every queue runs name
    now = created[0] + 40.0
    found = await queue_stats(store, now=now)
    assert set(found) == {"reports"}
    assert found["reports"] == QueueStats(
        name="reports",
        queued=2,
        oldest_wait=40.0,
        mean_wait=(40.0 + now - created[1]) / 2,
        by_priority={0: 2},
    )
