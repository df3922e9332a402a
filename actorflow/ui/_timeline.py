"""A run's timeline: one lane per agent and one for the orchestrator, a bar per step.

A step's bar runs from when it was issued to when its record was written
(records carry both; a record from before issue times were kept has only the
second, and shows as a tick). Steps that talk to an agent (``ask``, ``send``,
``spawn``) sit in that agent's lane; the rest (``decide``, ``now``, ``sleep``,
``wait``, ``child``, ``update``, ...) in the orchestrator's. Decisions,
checkpoints and phases are markers and bands over the lanes.

A step recorded by an earlier attempt at the run than the newest (it was
replayed by the attempts after) is told apart from one recorded live by the
newest attempt; records from before the attempt was kept are neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from actorflow.runtime import phase_of
from actorflow.storage import DecisionRecord, EventRecord, StepRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import LogRecord, SnapshotInfo

__all__ = ["ORCHESTRATOR", "Band", "Bar", "Marker", "Timeline", "build_timeline", "provenance"]

ORCHESTRATOR: Final = "orchestrator"
_AGENT_KINDS: Final = frozenset({"ask", "send", "spawn", "stop"})
_ATTEMPT_MARKS: Final = {
    "adopted": "a worker adopted the run: a new attempt, which replayed the steps before",
    "phase_retry": "the phase was retried from its start",
}
"""Log events that start another go at the run, shown as markers."""


@dataclass(frozen=True, kw_only=True)
class Bar:
    """One step on its lane; ``left`` and ``width`` are percent of the window."""

    position: int
    step_id: str
    kind: str
    target: str | None
    lane: str
    start: float
    end: float
    attempts: int
    failed: bool
    left: float
    width: float
    row: int = 0
    recorded_in: int | None = None
    newest: int = 0

    @property
    def replayed(self) -> bool:
        """Recorded live by an earlier attempt than the newest, which replayed it."""
        return self.recorded_in is not None and self.recorded_in < self.newest


@dataclass(frozen=True, kw_only=True)
class Marker:
    """A moment over the lanes: a decision or a checkpoint."""

    what: str
    label: str
    at: float
    left: float
    link: str


@dataclass(frozen=True, kw_only=True)
class Band:
    """A phase occurrence: from its first step's issue to its last step's record."""

    phase: str
    start: float
    end: float
    left: float
    width: float


@dataclass(kw_only=True)
class Timeline:
    """The lanes of a window of the log, with the window's bounds in time.

    ``replayed`` counts the window's steps recorded by an earlier attempt.
    """

    lanes: list[str] = field(default_factory=list)
    bars: dict[str, list[Bar]] = field(default_factory=dict)
    markers: list[Marker] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    replayed: int = 0

    @property
    def span(self) -> float:
        """Seconds from the window's first issue to its last record."""
        return max(self.end - self.start, 0.0)


def provenance(recorded_in: int | None, newest: int) -> list[str]:
    """Which attempts recorded a step live and which replayed it, for people (counted from 1).

    ``recorded_in`` and ``newest`` count as manifests do, from 0; a record
    from before attempts were kept says nothing.
    """
    if recorded_in is None:
        return []
    said = [f"recorded live in attempt {recorded_in + 1}"]
    if newest > recorded_in:
        first, last = recorded_in + 2, newest + 1
        said.append(
            f"replayed in attempt {last}"
            if first == last
            else f"replayed in attempts {first}..{last}"
        )
    return said


def _pct(at: float, start: float, span: float) -> float:
    return 0.0 if span <= 0 else max(0.0, min(100.0, (at - start) / span * 100.0))


_MIN_WIDTH: Final = 0.35
"""Percent of the window a bar takes at least when rows are packed, so ticks never overlap."""

_MAX_ROWS: Final = 8
"""Rows of one lane at most; more steps in flight at once share the last row."""


def _pack(bars: list[Bar]) -> tuple[list[Bar], int]:
    """Bars of one lane in rows, so that steps in flight together are each clickable."""
    ends: list[float] = []  # where each row is free again
    packed = []
    for bar in sorted(bars, key=lambda b: (b.left, b.position)):
        right = bar.left + max(bar.width, _MIN_WIDTH)
        row = next((i for i, end in enumerate(ends) if end <= bar.left), len(ends))
        row = min(row, _MAX_ROWS - 1)
        if row == len(ends):
            ends.append(right)
        else:
            ends[row] = max(ends[row], right)
        packed.append(replace(bar, row=row))
    return packed, max(len(ends), 1)


def build_timeline(
    records: Sequence[tuple[int, LogRecord]],
    snapshots: Sequence[SnapshotInfo],
    *,
    run_id: str,
    attempt: int = 0,
) -> Timeline:
    """The timeline of ``records`` (each with its log position), ``snapshots`` as markers.

    A step that talks to an agent (``ask``, ``send``, ``spawn``) is in that
    agent's lane, the rest in the orchestrator's; lanes come in the order
    their first step does. ``attempt`` is the run's newest attempt (its
    manifest's): steps recorded by an earlier one are marked replayed.
    """
    steps: list[tuple[int, StepRecord, float, float]] = []
    for position, record in records:
        if isinstance(record, StepRecord):
            end = record.time
            start = record.issued if 0 < record.issued <= end else end
            steps.append((position, record, start, end))
    times = [t for _, _, s, e in steps for t in (s, e) if t > 0]
    times += [r.time for _, r in records if isinstance(r, DecisionRecord) and r.time > 0]
    timeline = Timeline()
    if not times:
        return timeline
    timeline.start, timeline.end = min(times), max(times)
    span = timeline.span
    lanes: list[str] = [ORCHESTRATOR]
    phases: dict[str, list[float]] = {}
    for position, record, start, end in steps:
        lane = ORCHESTRATOR
        if record.kind in _AGENT_KINDS and record.target:
            lane = record.target
        if lane not in lanes:
            lanes.append(lane)
        left = _pct(start, timeline.start, span)
        bar = Bar(
            position=position,
            step_id=record.step_id,
            kind=record.kind,
            target=record.target,
            lane=lane,
            start=start,
            end=end,
            attempts=record.attempts,
            failed=record.error is not None,
            left=left,
            width=max(_pct(end, timeline.start, span) - left, 0.0),
            recorded_in=record.run_attempt,
            newest=attempt,
        )
        timeline.bars.setdefault(lane, []).append(bar)
        timeline.replayed += bar.replayed
        phase = phase_of(record.step_id)
        if phase is not None and start > 0:
            bounds = phases.setdefault(phase, [start, end])
            bounds[0], bounds[1] = min(bounds[0], start), max(bounds[1], end)
    timeline.lanes = lanes
    for lane, bars in timeline.bars.items():
        timeline.bars[lane], timeline.rows[lane] = _pack(bars)
    for phase, (start, end) in phases.items():
        left = _pct(start, timeline.start, span)
        width = max(_pct(end, timeline.start, span) - left, 0.0)
        timeline.bands.append(Band(phase=phase, start=start, end=end, left=left, width=width))
    for position, record in records:
        if isinstance(record, DecisionRecord) and record.time > 0:
            timeline.markers.append(
                Marker(
                    what="decision",
                    label=f"{record.type}: {record.description}"[:200],
                    at=record.time,
                    left=_pct(record.time, timeline.start, span),
                    link=f"/runs/{run_id}/records/{position}",
                )
            )
    for position, record in records:
        if isinstance(record, EventRecord) and record.kind in _ATTEMPT_MARKS and record.time > 0:
            timeline.markers.append(
                Marker(
                    what="attempt",
                    label=_ATTEMPT_MARKS[record.kind],
                    at=record.time,
                    left=_pct(record.time, timeline.start, span),
                    link=f"/runs/{run_id}/records/{position}",
                )
            )
    for info in snapshots:
        if timeline.start <= info.created <= timeline.end:
            timeline.markers.append(
                Marker(
                    what="checkpoint",
                    label=f"checkpoint {info.snapshot_id} ({info.trigger})",
                    at=info.created,
                    left=_pct(info.created, timeline.start, span),
                    link=f"/runs/{run_id}/checkpoints/{info.snapshot_id}",
                )
            )
    return timeline
