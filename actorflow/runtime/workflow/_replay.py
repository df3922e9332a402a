"""Replay: a run as its records describe it, the one non-determinism check, stored states.

Recovery builds a ``RunView`` (``load_view``) from the newest valid snapshot plus the log
after it; a live run applies each record as it is appended. The same view
answers the re-running orchestrator ("is there a record for step 3/7?") and
gives the checkpoint actor its snapshots, so both always agree. A snapshot is
built from records alone, never from live objects, so it is consistent across
concurrent agents by construction and a later state cannot leak into it.

``check_replay`` is the one place a replayed step is compared with its record
(``NonDeterminismError``); ``decode_agent_state`` is the one place a stored
state becomes an agent's state again, upgraded from the version it was stored
with.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

import msgspec

from actorflow._text import error_message
from actorflow.errors import CorruptedDataError, NewerFormatError, NonDeterminismError
from actorflow.runtime.workflow._ids import phase_of
from actorflow.runtime.workflow._outcomes import END_EVENT
from actorflow.runtime.workflow._wait_records import TAKING_KINDS, taken_seq
from actorflow.storage import (
    AgentSnapshot,
    DecisionRecord,
    EventRecord,
    MilestoneRecord,
    PhaseEndRecord,
    RunStatus,
    Snapshot,
    StateRef,
    StepRecord,
    decode_state,
    read_window_and_after,
    resolve_snapshot,
    settled_entries,
    settled_key,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType

    from actorflow.storage import ChunkRef, HistoryEntry, LogRecord, SnapshotInfo, Store

__all__ = ["Capture", "RunView", "call_site", "check_replay", "decode_agent_state", "load_view"]


_STOPPED = "stopped"
"""The status of an agent of a run that has ended (completed, failed or cancelled)."""


def _inside(step_id: str, phase_id: str) -> bool:
    """Whether ``step_id`` belongs to phase ``phase_id`` (any attempt, nested phases too)."""
    n = len(phase_id)
    return len(step_id) > n and step_id[n] in "/@" and step_id.startswith(phase_id)


class Capture:
    """A snapshot as the view takes it: its open part, and how far into the journal it reaches.

    ``snapshot`` holds what may still change (agents, metrics, what is
    inside unfinished phases); the settled entries it covers are the view's
    ``journal`` up to ``settled``, which the checkpoint actor puts in the
    stored snapshot or in a history chunk (see ``actorflow.storage._history``).
    """

    __slots__ = ("settled", "snapshot")

    def __init__(self, snapshot: Snapshot, settled: int) -> None:
        self.snapshot = snapshot
        self.settled = settled


class RunView:
    """Everything recorded about one run up to ``position``.

    ``phases``, ``steps`` and ``events`` hold everything, for replay's
    lookups; what is inside an unfinished phase is also kept apart (all a
    phase's end may remove, and all a snapshot copies), and every settled
    entry is appended to ``journal`` as it happens, after ``history``, the
    newest history chunk the run's stored snapshot named when the view was
    loaded.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.position = 0
        self.agents: dict[str, AgentSnapshot] = {}
        self.decisions: list[DecisionRecord] = []
        self.decided: dict[str, DecisionRecord] = {}
        self.phases: dict[str, PhaseEndRecord] = {}
        self.steps: dict[str, StepRecord] = {}
        self.milestones: dict[str, MilestoneRecord] = {}
        self.events: dict[str, EventRecord] = {}
        self.metrics: dict[str, float] = {}
        self.phase: str | None = None
        # what readers show (``query``, ``actorflow runs``): the phase of the newest
        # logged step, which no snapshot may name when a phase's start coalesced
        # with the previous one's end
        self.logged_phase: str | None = None
        self.status = RunStatus.RUNNING
        self.snapshots_taken = 0
        self.steps_since_snapshot = 0
        self.roles: dict[str, str] = {}
        self.inbox_taken: set[int] = set()
        self.journal: list[HistoryEntry] = []
        # the log position of each journal entry's record (-1: not known, carried by a
        # snapshot from before windows), so a snapshot may name them in the log instead
        self.journal_at: list[int] = []
        self.history: ChunkRef | None = None
        self._open_phases: dict[str, PhaseEndRecord] = {}
        self._open_steps: dict[str, StepRecord] = {}
        self._open_events: dict[str, EventRecord] = {}

    @classmethod
    def from_snapshot(
        cls,
        snapshot: Snapshot,
        head: Snapshot | None = None,
        window: Sequence[tuple[int, HistoryEntry]] = (),
    ) -> RunView:
        """A view at the snapshot's position.

        ``snapshot`` is whole (its history put back inline); ``head`` is the
        snapshot as stored, when it names a history or a window: the entries
        of its ``window`` (read from the log, with their positions), then the
        settled entries it carries itself, start the view's journal.
        """
        view = cls(snapshot.run_id)
        view.position = snapshot.position
        view.agents = dict(snapshot.agents)
        view.decisions = list(snapshot.decisions)
        view.decided = {d.step_id: d for d in snapshot.decisions}
        view.phases = dict(snapshot.phases)
        view.steps = {s.step_id: s for s in snapshot.steps}
        view.milestones = {m.key: m for m in snapshot.milestones}
        view.events = {e.step_id or e.kind: e for e in snapshot.events}
        view.metrics = dict(snapshot.metrics)
        view.phase = view.logged_phase = snapshot.phase
        view.inbox_taken = set(snapshot.inbox_taken)
        view._open_phases = {k: v for k, v in view.phases.items() if not settled_key(k)}
        view._open_steps = {k: v for k, v in view.steps.items() if not settled_key(k)}
        view._open_events = {k: v for k, v in view.events.items() if not settled_key(k)}
        stored = head if head is not None else snapshot
        carried = settled_entries(stored)
        view.journal = [entry for _, entry in window] + carried
        view.journal_at = [position for position, _ in window] + [-1] * len(carried)
        view.history = stored.history
        return view

    # --- following the log -------------------------------------------------

    def apply(self, record: LogRecord) -> int:
        """Take one record (the next in the log) into the view; return its position."""
        match record:
            case StepRecord():
                self._apply_step(record)
                self.logged_phase = phase_of(record.step_id) or self.logged_phase
            case PhaseEndRecord():
                self._finish_phase(record)
                self.logged_phase = record.name  # ended: the next shows with its first step
            case DecisionRecord():
                self.decisions.append(record)
                self.decided[record.step_id] = record
                self._journal(record)
                self.logged_phase = phase_of(record.step_id) or self.logged_phase
            case MilestoneRecord():
                self.milestones[record.key] = record
            case EventRecord():
                key = record.step_id or record.kind
                self.events[key] = record
                if settled_key(key):
                    self._journal(record)
                else:
                    self._open_events[key] = record
                if record.kind == END_EVENT:
                    self._stop_agents()
        position = self.position
        self.position = position + 1
        return position

    def _journal(self, entry: HistoryEntry) -> None:
        self.journal.append(entry)
        self.journal_at.append(self.position)

    def _apply_step(self, record: StepRecord) -> None:
        step_id = record.step_id
        self.steps[step_id] = record
        if settled_key(step_id):
            self._journal(record)
        else:
            self._open_steps[step_id] = record
        if record.kind in TAKING_KINDS:
            seq = taken_seq(record)
            if seq is not None and seq not in self.inbox_taken:
                self.inbox_taken.add(seq)
                self._journal(seq)
            if record.kind == "update":
                # a finished update never runs again: its own steps need not travel
                self._drop_inside(record.step_id)
        self.steps_since_snapshot += 1
        for name, value in record.metrics.items():
            self.metrics[name] = self.metrics.get(name, 0.0) + value
        self.metrics["steps"] = self.metrics.get("steps", 0.0) + 1
        ref = record.state
        if ref is not None:
            old = self.agents.get(ref.agent)
            # an agent stopped when a run ended works again in a fork from its last snapshot
            status = old.status if old is not None and old.status != _STOPPED else "running"
            self.agents[ref.agent] = AgentSnapshot(
                name=ref.agent,
                type=ref.type,
                status=status,
                state=ref,
                confidence=old.confidence if old is not None else None,
                # the spawn record names the class's module; later states need not
                module=ref.module or (old.module if old is not None else None),
            )
        if record.error is not None and record.target in self.agents:
            self._set_agent(record.target, status="failed")
        elif record.kind == "ask" and record.target is not None:
            self._read_confidence(record.target, record.result)

    def _read_confidence(self, agent: str, result: bytes | None) -> None:
        if self.roles.get(agent) != "evaluator" or result is None:
            return
        try:
            reply = msgspec.msgpack.decode(result)
        except msgspec.DecodeError:
            return
        confidence = reply.get("confidence") if isinstance(reply, dict) else None
        if isinstance(confidence, int | float):
            self._set_agent(agent, confidence=float(confidence))

    def _set_agent(self, name: str, **changes: object) -> None:
        old = self.agents.get(name)
        if old is not None:
            self.agents[name] = msgspec.structs.replace(old, **changes)

    def _stop_agents(self) -> None:
        """The run has ended: its agents are no longer running (a failed one stays failed)."""
        for name, agent in self.agents.items():
            if agent.status == "running":
                self.agents[name] = msgspec.structs.replace(agent, status=_STOPPED)

    def _drop_inside(self, prefix: str) -> None:
        # only open entries can be inside anything: settled ones are at the top level
        _drop(self._open_steps, self.steps, prefix)
        _drop(self._open_events, self.events, prefix)

    def _finish_phase(self, record: PhaseEndRecord) -> None:
        pid = record.phase_id
        # A finished phase is replayed from its result alone: what ran inside
        # it no longer needs to travel in snapshots.
        self._drop_inside(pid)
        _drop(self._open_phases, self.phases, pid)
        self.milestones = {
            k: v for k, v in self.milestones.items() if not _inside(k.partition("/")[2], pid)
        }
        self.phases[pid] = record
        if settled_key(pid):
            self._journal(record)
        else:
            self._open_phases[pid] = record

    def confidence_of(self, agent: str | None) -> float | None:
        """The latest confidence an evaluator ``agent`` replied with, if any."""
        snap = self.agents.get(agent or "")
        return snap.confidence if snap is not None else None

    def recorded(self, step_id: str) -> tuple[str, str | None, str] | None:
        """``(kind, target, args_hash)`` of what the log holds at ``step_id``, if anything.

        Decisions count as kind ``decision`` with their type as the hash, a
        ``ctx.patched`` marker as kind ``patch`` with its change id: code
        issuing a step where the run took a patch is code from before it.
        """
        step = self.steps.get(step_id)
        if step is not None:
            return step.kind, step.target, step.args_hash
        decision = self.decided.get(step_id)
        if decision is not None:
            return "decision", None, decision.type
        marker = self.events.get(step_id)
        if marker is not None and marker.kind == "patch":
            return "patch", None, (marker.data or b"").decode(errors="replace")
        return None

    def state_of(self, agent: str) -> StateRef | None:
        """The agent's latest recorded state."""
        snap = self.agents.get(agent)
        return snap.state if snap is not None else None

    # --- snapshots ---------------------------------------------------------

    def snapshot(self, trigger: str) -> Capture:
        """The view as a snapshot at the current position (cheap: no encoding, nothing settled)."""
        self.snapshots_taken += 1
        self.steps_since_snapshot = 0
        if self.status.finished:  # the final snapshot: taken before the end record is applied
            self._stop_agents()
        snapshot = Snapshot(
            run_id=self.run_id,
            snapshot_id=f"{self.snapshots_taken:04d}-p{self.position}",
            position=self.position,
            created=time.time(),
            trigger=trigger,
            phase=self.phase,
            status=self.status,
            agents=dict(self.agents),
            phases=dict(self._open_phases),
            steps=tuple(self._open_steps.values()),
            milestones=tuple(self.milestones.values()),
            events=tuple(self._open_events.values()),
            metrics=dict(self.metrics),
        )
        return Capture(snapshot, len(self.journal))


def _drop(open_entries: dict[str, Any], every: dict[str, Any], prefix: str) -> None:
    """Remove the entries inside ``prefix`` from ``open_entries`` and ``every``."""
    doomed = [k for k in open_entries if _inside(k, prefix)]
    for key in doomed:
        del open_entries[key]
        del every[key]


def check_replay(view: RunView, step_id: str, kind: str, target: str | None, digest: str) -> None:
    """Raise ``NonDeterminismError`` if the log holds something else at ``step_id``.

    The one check of the recovery contract: a replayed step must have the
    kind, target and argument hash its record has. Nothing recorded: no check.
    """
    recorded = view.recorded(step_id)
    if recorded is not None and recorded != (kind, target, digest):
        was_kind, was_target, was_hash = recorded
        raise NonDeterminismError(
            view.run_id,
            step_id,
            _describe(was_kind, was_target, was_hash),
            _describe(kind, target, digest),
            call_site(),
        )


def _describe(kind: str, target: str | None, digest: str) -> str:
    if kind == "decision":
        return f"decision {digest}"
    if kind == "patch":
        return f"a ctx.patched({digest!r}) marker"
    return f"{kind} {target or ''} (args {digest})"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def call_site() -> str:
    """``file:line`` of the nearest caller outside actorflow, for error messages."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def decode_agent_state(data: bytes, state_cls: type[Any], ref: StateRef, agent: str) -> Any:
    """Agent ``agent``'s state stored under ``ref``, as an instance of today's ``state_cls``.

    A state stored by an older version of the class goes through its
    ``upgrade_state``; one stored by a newer version, or an older one the
    class cannot upgrade, raises ``IncompatibleStateError`` naming the class
    and both versions. Never a silent default.
    """
    return decode_state(data, state_cls, version=ref.version)


async def load_view(store: Store, run_id: str, emit: Callable[..., None]) -> tuple[RunView, int]:
    """The run as recorded: newest valid snapshot plus the log after it.

    A snapshot that fails its checksum is reported and skipped for the one
    before it; with none usable the whole log is read. Returns the view and
    how many log records were read after the snapshot.
    """
    view: RunView | None = None
    after: list[LogRecord] | None = None  # the log after the snapshot, read with its window
    infos = await store.list_snapshots(run_id)
    for info in reversed(infos):
        try:
            head = await store.read_snapshot(run_id, info.snapshot_id)
            window: list[tuple[int, HistoryEntry]] = []
            tail: list[LogRecord] | None = None
            if head.window is not None:
                # damage or a cut in the records a window names makes the snapshot
                # unusable, as a lost chunk does: the one before it serves
                window, tail = await read_window_and_after(store, head)
            # a chunk lost to a power loss (written unsynced, as the snapshot)
            # makes the snapshot unusable, not the run: the one before it serves
            snapshot = await resolve_snapshot(store, head, window=window)
        except NewerFormatError:
            raise  # sound, and newer than this code: the run is for a newer worker
        except CorruptedDataError as exc:
            emit(
                "checkpoint_corrupted",
                snapshot_id=info.snapshot_id,
                error=error_message(exc),
                level="warning",
            )
            continue
        view, after = RunView.from_snapshot(snapshot, head, window), tail
        emit("checkpoint_restored", snapshot_id=info.snapshot_id, position=snapshot.position)
        break
    if view is None:
        view = RunView(run_id)
    view.snapshots_taken = _snapshots_numbered(infos)
    records = after if after is not None else await store.read_log(run_id, view.position)
    for record in records:
        view.apply(record)
    view.steps_since_snapshot = 0
    return view, len(records)


def _snapshots_numbered(infos: list[SnapshotInfo]) -> int:
    """How far a run's snapshot ids (``0007-p120``) have counted: new ids go on from there.

    Not merely how many are left: pruned ones must not have their ids reused.
    """
    counted = len(infos)
    for info in infos:
        number = info.snapshot_id.partition("-")[0]
        if number.isdigit():
            counted = max(counted, int(number))
    return counted
