"""The timeline's layout: lanes, bars from issue to record, rows for steps in flight together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.storage import DecisionRecord, ErrorInfo, EventRecord, SnapshotInfo, StepRecord
from actorflow.ui._timeline import ORCHESTRATOR, build_timeline, provenance

if TYPE_CHECKING:
    from actorflow.storage import LogRecord


def _step(
    step_id: str, kind: str, target: str | None, issued: float, time: float, **kw: object
) -> StepRecord:
    return StepRecord(step_id=step_id, kind=kind, target=target, issued=issued, time=time, **kw)  # type: ignore[arg-type]


def test_lanes_bars_rows_and_markers() -> None:
    records: list[tuple[int, LogRecord]] = [
        (0, _step("p.0/0", "spawn", "a", 100.0, 100.0)),
        (1, _step("p.0/1", "ask", "a", 100.0, 104.0)),
        (2, _step("p.0/2", "ask", "a", 101.0, 102.0, attempts=3)),  # in flight with 1
        (3, _step("p.0/3", "now", None, 104.0, 104.0)),
        (4, _step("q.0/0", "ask", "b", 105.0, 110.0, error=ErrorInfo(type="E", message="m"))),
        (5, DecisionRecord(step_id="q.0/1", agent="orchestrator", type="go", time=108.0)),
        (6, EventRecord(kind="adopted", time=106.0)),
        (7, _step("q.0/2", "ask", "b", 0.0, 109.0)),  # written before issue times were kept
    ]
    snapshots = [
        SnapshotInfo(snapshot_id="0001", position=4, phase="p", trigger="t", created=104.5)
    ]
    timeline = build_timeline(records, snapshots, run_id="r")
    assert timeline.lanes == [ORCHESTRATOR, "a", "b"]
    assert (timeline.start, timeline.end) == (100.0, 110.0)
    a = {bar.position: bar for bar in timeline.bars["a"]}
    assert a[1].left == 0.0
    assert a[1].width == 40.0
    assert a[2].row != a[1].row  # both clickable
    assert a[2].attempts == 3
    assert timeline.rows["a"] == 2
    b = {bar.position: bar for bar in timeline.bars["b"]}
    assert b[4].failed
    assert b[7].width == 0.0  # a tick at its record's time
    assert [bar.kind for bar in timeline.bars[ORCHESTRATOR]] == ["now"]
    assert {band.phase for band in timeline.bands} == {"p", "q"}
    kinds = sorted(m.what for m in timeline.markers)
    assert kinds == ["attempt", "checkpoint", "decision"]
    assert all(m.link.startswith("/runs/r/") for m in timeline.markers)


def test_no_steps_no_lanes() -> None:
    assert build_timeline([], [], run_id="r").lanes == []


def test_steps_recorded_by_an_earlier_attempt_are_replayed() -> None:
    records: list[tuple[int, LogRecord]] = [
        (0, _step("p.0/0", "ask", "a", 100.0, 101.0, run_attempt=0)),
        (1, _step("p.0/1", "ask", "a", 101.0, 102.0, run_attempt=1, attempts=2)),
        (2, _step("p.0/2", "ask", "a", 102.0, 103.0, run_attempt=2)),
        (3, _step("p.0/3", "ask", "a", 103.0, 104.0)),  # written before attempts were kept
    ]
    bars = {
        bar.position: bar for bar in build_timeline(records, [], run_id="r", attempt=2).bars["a"]
    }
    assert [bars[p].replayed for p in range(4)] == [True, True, False, False]
    assert bars[1].attempts == 2  # its retries stay marked
    assert provenance(0, 2) == ["recorded live in attempt 1", "replayed in attempts 2..3"]
    assert provenance(1, 2) == ["recorded live in attempt 2", "replayed in attempt 3"]
    assert provenance(2, 2) == ["recorded live in attempt 3"]
    assert provenance(None, 2) == []
