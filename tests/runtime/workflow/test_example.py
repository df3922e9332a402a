"""The issue's example, end to end, on both event loops."""

from __future__ import annotations

import contextlib
import gc

from actorflow import Runtime
from actorflow.storage import MemoryStore, RunStatus, read_full_snapshot
from tests.runtime.workflow.workflows import Finding, Lead, Report


async def test_example_runs_and_records_a_completed_run() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        report = await runtime.run(Lead, "a;b;c", run_id="example")
    assert report == Report(
        [Finding("a", "A", 0.9), Finding("b", "B", 0.9), Finding("c", "C", 0.9)], 0.9
    )
    manifest = await store.read_run("example")
    assert manifest.status is RunStatus.COMPLETED
    snapshots = await store.list_snapshots("example")
    assert snapshots, "phase boundaries and the finish take snapshots"
    last = await read_full_snapshot(store, "example", snapshots[-1].snapshot_id)
    assert last.status is RunStatus.COMPLETED
    assert set(last.agents) == {"researcher-0", "researcher-1", "researcher-2", "reviewer"}
    assert [d.type for d in last.decisions] == ["accept"]


async def test_a_run_reports_its_metrics_and_lifecycle_events() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Lead, "a;b;c")
        await handle.result()
        events = [event.name async for event in handle.events()]
    metrics = handle.metrics
    assert metrics["steps"] == 8, "4 spawns and 4 asks"
    assert metrics["checkpoints"] >= 1
    assert metrics["elapsed"] > 0
    assert metrics["recoveries"] == 0
    for name in ("run_started", "phase_started", "phase_ended", "decision_made"):
        assert name in events
    assert events[-1] == "run_finished"
    assert "checkpoint_saved" in events


async def test_a_reader_that_leaves_the_event_stream_early_leaves_no_stream_open() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Lead, "a;b;c")
        async with contextlib.aclosing(handle.events()) as events:
            async for _ in events:
                break  # the run emits on: its stream to this reader must be let go of, closed
        await handle.result()
    gc.collect()  # an unclosed stream warns as it is collected (an error under pytest)
