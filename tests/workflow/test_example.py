"""The issue's example, end to end, on both event loops."""

from __future__ import annotations

from actorflow import Runtime
from actorflow.storage import RunStatus
from actorflow.storage._memory import MemoryStore
from tests.workflow.workflows import Finding, Lead, Report


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
    last = await store.read_snapshot("example", snapshots[-1].snapshot_id)
    assert last.status is RunStatus.COMPLETED
    assert set(last.agents) == {"researcher-0", "researcher-1", "researcher-2", "reviewer"}
    assert [d.type for d in last.decisions] == ["accept"]
