"""Two runs side by side: a run and its fork, say, step by step (``compare_runs``).

What each run recorded is matched by id: steps by step id (ids are the same
in every run of one workflow's code), phases by phase id, decisions by their
step's id. A fork's past is its parent's: its records are the parent's log up
to the checkpoint it was forked at, then its own log, so the shared past
matches as equal and the comparison shows where the two went apart. Values
are decoded without their classes (as ``actorflow show`` does), so comparing
never imports or runs the code that wrote them. It takes no claim and writes
nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from actorflow.errors import LogPrunedError, RunNotFoundError, StorageError
from actorflow.runtime.workflow._plain import decode_plain, field_changes, plain
from actorflow.storage import (
    DecisionRecord,
    ForkEdit,
    PhaseEndRecord,
    RunStatus,
    SnapshotStatus,
    StepRecord,
    read_full_snapshot,
    validate_run_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from actorflow.storage import LogRecord, RunManifest, Snapshot, Store

__all__ = ["Compared", "ComparedRun", "FieldChange", "RunComparison", "compare_runs"]

R = TypeVar("R", StepRecord, PhaseEndRecord, DecisionRecord)

# a fork of a fork of ...: how many parents deep a run's past is followed
_MAX_FORK_DEPTH = 32


class FieldChange(msgspec.Struct, frozen=True, kw_only=True):
    """One top-level field that differs between two values.

    Attributes:
        field: the field's name, or ``<value>`` when the two values are not
            both mappings (they then differ as a whole).
        a: its value in the first run (``None`` if absent); a long list or
            mapping is shown by its size (``<list of 40>``).
        b: the same in the second run.

    .. versionadded:: 0.5
    """

    field: str
    a: Any = None
    b: Any = None


class Compared(msgspec.Struct, frozen=True, kw_only=True):
    """One thing the two runs recorded (or one of them did), side by side.

    Attributes:
        key: what matches them: a step id, a phase id, a decision's step
            id, or ``status``, ``result``, ``error``.
        label: what it is, for people: ``ask writer``, a phase's name, a
            decision's type.
        a: its value in the first run, as plain data (decoded without its
            class: a step's reply, or ``{"error": {...}}`` for a failed one;
            a phase's result; a decision's fields); ``None`` if absent.
        b: the same in the second run.
        in_a: whether the first run has it.
        in_b: whether the second run has it.
        differs: whether they differ (also when only one run has it).
        changes: the top-level fields that differ, when both have it.

    .. versionadded:: 0.5
    """

    key: str
    label: str = ""
    a: Any = None
    b: Any = None
    in_a: bool = True
    in_b: bool = True
    differs: bool = False
    changes: tuple[FieldChange, ...] = ()


class ComparedRun(msgspec.Struct, frozen=True, kw_only=True):
    """One of the two runs compared: what it is and where it came from.

    Attributes:
        run_id: the run.
        workflow: its workflow's registered name.
        status: where it stands.
        parent: the run it was forked from, if it is a fork.
        parent_snapshot: the checkpoint of ``parent`` it was forked at.
        fork_edits: the agents whose state the fork was started with edited.

    .. versionadded:: 0.5
    """

    run_id: str
    workflow: str
    status: RunStatus
    parent: str | None = None
    parent_snapshot: str | None = None
    fork_edits: tuple[ForkEdit, ...] = ()


class RunComparison(msgspec.Struct, frozen=True, kw_only=True):
    """Two runs side by side, as :func:`compare_runs` reads them.

    Plain data: encode it with ``msgspec`` (``actorflow compare --json``
    prints it). Each sequence is in the order the first run recorded its
    items, with the second run's own ones placed after the item it recorded
    before them.

    Attributes:
        a: the first run.
        b: the second run.
        status: their statuses.
        result: their results (a completed run's, decoded), ``None`` for a
            run without one.
        error: what ended each run that failed, was cancelled or is blocked.
        phases: the finished phases' results, by phase id.
        decisions: the decisions, by their step's id.
        steps: the steps' replies, by step id.
        differs: whether anything above differs.

    .. versionadded:: 0.5
    """

    a: ComparedRun
    b: ComparedRun
    status: Compared
    result: Compared
    error: Compared
    phases: tuple[Compared, ...] = ()
    decisions: tuple[Compared, ...] = ()
    steps: tuple[Compared, ...] = ()
    differs: bool = False


async def compare_runs(store: Store, run_a: str, run_b: str) -> RunComparison:
    """Compare two runs of ``store`` (typically a run and a fork of it) side by side.

    Reads their manifests and records (the log, and where retention pruned
    it, the oldest checkpoint kept) without taking either run: a live run is
    compared as far as it has durably recorded.

    Raises:
        InvalidRunIdError: a run id is not a valid one.
        RunNotFoundError: no such run.
        LogCorruptedError: a log record needed is corrupt.
        EncryptionKeyError: a run is encrypted with a key the store was not given.

    .. versionadded:: 0.5
    """
    manifest_a = await store.read_run(validate_run_id(run_a))
    manifest_b = await store.read_run(validate_run_id(run_b))
    history_a = _History(await _recorded(store, manifest_a, None, 0))
    history_b = _History(await _recorded(store, manifest_b, None, 0))
    status = _pair("status", "status", str(manifest_a.status), str(manifest_b.status))
    result = _pair(
        "result", "result", decode_plain(manifest_a.result), decode_plain(manifest_b.result)
    )
    error = _pair("error", "error", _error(manifest_a), _error(manifest_b))
    phases = _match(history_a.phases, history_b.phases, _phase)
    decisions = _match(history_a.decisions, history_b.decisions, _decision)
    steps = _match(history_a.steps, history_b.steps, _step)
    compared = (status, result, error, *phases, *decisions, *steps)
    return RunComparison(
        a=_run(manifest_a),
        b=_run(manifest_b),
        status=status,
        result=result,
        error=error,
        phases=phases,
        decisions=decisions,
        steps=steps,
        differs=any(c.differs for c in compared),
    )


def _run(manifest: RunManifest) -> ComparedRun:
    return ComparedRun(
        run_id=manifest.run_id,
        workflow=manifest.workflow,
        status=manifest.status,
        parent=manifest.parent,
        parent_snapshot=manifest.parent_snapshot,
        fork_edits=manifest.fork_edits,
    )


def _error(manifest: RunManifest) -> Any:
    return plain(msgspec.to_builtins(manifest.error)) if manifest.error is not None else None


# --- what a run recorded --------------------------------------------------------


class _History:
    """A run's steps, phase ends and decisions by id, in the order first recorded."""

    def __init__(self, records: Iterable[LogRecord]) -> None:
        self.steps: dict[str, StepRecord] = {}
        self.phases: dict[str, PhaseEndRecord] = {}
        self.decisions: dict[str, DecisionRecord] = {}
        for record in records:
            match record:
                case StepRecord(step_id=key):
                    self.steps[key] = record
                case PhaseEndRecord(phase_id=key):
                    self.phases[key] = record
                case DecisionRecord(step_id=key):
                    self.decisions[key] = record
                case _:
                    pass


async def _recorded(
    store: Store, manifest: RunManifest, upto: int | None, depth: int
) -> list[LogRecord]:
    """What the run recorded, oldest first: its past (a fork's), then its log up to ``upto``."""
    run_id = manifest.run_id
    try:
        log = await store.read_log(run_id, 0)
        start = 0
        past = await _past_of_fork(store, manifest, depth)
    except LogPrunedError as exc:
        # retention cut the log below a checkpoint it kept: that checkpoint holds the past
        snapshot = await _oldest_snapshot(store, run_id, exc.first)
        if snapshot is None or (upto is not None and upto < snapshot.position):
            raise  # nothing kept holds the records before upto
        start = snapshot.position
        log = await store.read_log(run_id, start)
        past = _snapshot_records(snapshot)
    if upto is not None:
        log = log[: max(0, upto - start)]
    return [*past, *log]


async def _past_of_fork(store: Store, manifest: RunManifest, depth: int) -> list[LogRecord]:
    """A fork's past: its parent's records up to the checkpoint it was forked at.

    Where the parent or that checkpoint is gone, the fork's first snapshot
    (a copy of that checkpoint) holds what it can of it.
    """
    if manifest.parent is None or manifest.parent_snapshot is None:
        return []
    if depth < _MAX_FORK_DEPTH:
        try:
            parent = await store.read_run(manifest.parent)
            infos = [] if parent.tombstone else await store.list_snapshots(parent.run_id)
            at = next(
                (
                    i
                    for i in infos
                    if i.snapshot_id == manifest.parent_snapshot
                    and i.status is SnapshotStatus.CREATED
                ),
                None,
            )
            if at is not None:
                return await _recorded(store, parent, at.position, depth + 1)
        except (RunNotFoundError, LogPrunedError):
            pass
    first = await _oldest_snapshot(store, manifest.run_id, 0)
    return _snapshot_records(first) if first is not None else []


async def _oldest_snapshot(store: Store, run_id: str, position: int) -> Snapshot | None:
    """The run's oldest readable snapshot at ``position`` or after, if any."""
    infos = [
        i
        for i in await store.list_snapshots(run_id)
        if i.status is SnapshotStatus.CREATED and i.position >= position
    ]
    for info in sorted(infos, key=lambda i: (i.position, i.created)):
        try:
            return await read_full_snapshot(store, run_id, info.snapshot_id)
        except StorageError:  # corrupt, or deleted meanwhile: the next one
            continue
    return None


def _snapshot_records(snapshot: Snapshot) -> list[LogRecord]:
    """What a snapshot holds of the records before it, oldest first."""
    held: list[LogRecord] = [*snapshot.phases.values(), *snapshot.decisions, *snapshot.steps]
    return sorted(held, key=lambda r: r.time)


# --- matching ----------------------------------------------------------------------


def _pair(
    key: str, label: str, a: Any, b: Any, *, in_a: bool = True, in_b: bool = True
) -> Compared:
    both = in_a and in_b
    changes = field_changes(a, b) if both else {}
    return Compared(
        key=key,
        label=label,
        a=a,
        b=b,
        in_a=in_a,
        in_b=in_b,
        differs=bool(changes) or not both,
        changes=tuple(FieldChange(field=f, a=old, b=new) for f, (old, new) in changes.items()),
    )


def _match(
    a: Mapping[str, R], b: Mapping[str, R], describe: Callable[[R], tuple[str, Any]]
) -> tuple[Compared, ...]:
    """Each id either run has, its records side by side, in the merged order of both."""
    matched = []
    for key in _merged(list(a), list(b)):
        one, other = a.get(key), b.get(key)
        label, value_a = describe(one) if one is not None else ("", None)
        label_b, value_b = describe(other) if other is not None else ("", None)
        found = {"in_a": one is not None, "in_b": other is not None}
        matched.append(_pair(key, label or label_b, value_a, value_b, **found))
    return tuple(matched)


def _merged(a: list[str], b: list[str]) -> list[str]:
    """``a``'s keys in order, each of ``b``'s own placed after the key ``b`` has before it."""
    in_a = set(a)
    merged: list[str] = []
    placed: set[str] = set()
    next_a = 0
    for key in b:
        if key in in_a:
            # a's keys up to this one come first, in a's order
            while key not in placed:
                merged.append(a[next_a])
                placed.add(a[next_a])
                next_a += 1
        elif key not in placed:
            merged.append(key)
            placed.add(key)
    merged.extend(k for k in a[next_a:] if k not in placed)
    return merged


def _step(record: StepRecord) -> tuple[str, Any]:
    label = f"{record.kind} {record.target}" if record.target else record.kind
    if record.error is not None:
        return label, {"error": plain(msgspec.to_builtins(record.error))}
    return label, decode_plain(record.result)


def _phase(record: PhaseEndRecord) -> tuple[str, Any]:
    return record.name, decode_plain(record.result)


def _decision(record: DecisionRecord) -> tuple[str, Any]:
    fields = plain(msgspec.to_builtins(record))
    for kept_apart in ("tag", "step_id", "time"):
        fields.pop(kept_apart, None)
    return record.type, fields


# Resolves (and caches) the annotations while this module's names are in
# scope: ``actorflow.runtime`` re-exports the classes under its own name, where
# ``msgspec`` could not find them any more to decode a comparison (from JSON, say).
msgspec.json.Decoder(RunComparison)
