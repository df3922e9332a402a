"""Looking inside a store without running anything: the logic behind the readers, no rendering.

Stored user values (inputs, results, agent states) are MessagePack bytes; they
are decoded here without a type (``msgspec.msgpack.decode``), so inspecting a
store never imports or runs the code that wrote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from actorflow.errors import (
    CheckpointNotFoundError,
    CorruptedDataError,
    EncryptionKeyError,
    LogPrunedError,
    StorageError,
)
from actorflow.runtime.workflow._plain import decode_plain, field_changes, plain
from actorflow.storage import (
    DecisionRecord,
    EventRecord,
    InboxChecker,
    MilestoneRecord,
    PhaseEndRecord,
    SealChecker,
    SnapshotStatus,
    StepRecord,
    read_full_snapshot,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import (
        LogRecord,
        MessageRef,
        SealCheck,
        Snapshot,
        SnapshotInfo,
        StateRef,
        Store,
        UnreadableEntry,
    )

__all__ = [
    "Problem",
    "ValidationReport",
    "checkpoint_rows",
    "diff_snapshots",
    "live_snapshots",
    "read_message",
    "record_to_dict",
    "resolve_checkpoint",
    "snapshot_to_dict",
    "validate_store",
]

_TORN = (
    "not synced yet, so a power loss may have cut it short: harmless, recovery skips it "
    "for the checkpoint before it (or the log), and `actorflow prune` deletes it;"
)


_SKIPPED = (
    "a damaged inbox message: the run skips it and reads the messages after it; "
    "restore the file from a backup, or post the message again"
)


def live_snapshots(infos: list[SnapshotInfo]) -> list[SnapshotInfo]:
    """The snapshots that still exist (not expired or deleted), oldest first."""
    return [i for i in infos if i.status is SnapshotStatus.CREATED]


async def checkpoint_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The run's checkpoints, oldest first, each read and verified.

    Each row is the listing's entry plus ``checksum`` (``ok`` or what is
    corrupt) and ``forkable``: whether ``fork`` can start a run from it, that
    is, it verifies and the state blobs a fork copies are all there.

    Raises:
        RunNotFoundError: no such run.
    """
    await store.read_run(run_id)
    blobs = set(await store.list_blobs(run_id))
    rows = []
    for info in live_snapshots(await store.list_snapshots(run_id)):
        try:
            snapshot = await read_full_snapshot(store, run_id, info.snapshot_id)
        except CorruptedDataError as exc:
            check, forkable = f"corrupt: {exc.cause_text}", False
        else:
            check, forkable = "ok", _blobs_a_fork_copies(snapshot) <= blobs
        rows.append({**msgspec.to_builtins(info), "checksum": check, "forkable": forkable})
    return rows


def _blobs_a_fork_copies(snapshot: Snapshot) -> set[str]:
    # what runtime.fork copies into the new run: its agents' states kept as blobs
    return {
        a.state.blob
        for a in snapshot.agents.values()
        if a.state is not None and a.state.data is None and a.state.blob
    }


async def resolve_checkpoint(store: Store, run_id: str, checkpoint: str) -> str:
    """The id of ``checkpoint``: an id, a unique id prefix, ``latest`` or ``latest~N``.

    ``latest~N`` is the N-th checkpoint before the newest (``latest~0`` is ``latest``).

    Raises:
        CheckpointNotFoundError: nothing matches, or a prefix matches more than one.
    """
    ids = [i.snapshot_id for i in live_snapshots(await store.list_snapshots(run_id))]
    if checkpoint == "latest" and ids:
        return ids[-1]
    base, tilde, back = checkpoint.partition("~")
    if base == "latest" and tilde and back.isdigit() and int(back) < len(ids):
        return ids[-1 - int(back)]
    if checkpoint in ids:
        return checkpoint
    matches = [i for i in ids if i.startswith(checkpoint)]
    if len(matches) == 1:
        return matches[0]
    raise CheckpointNotFoundError(run_id, checkpoint)


async def _state_value(store: Store, run_id: str, ref: StateRef | None) -> Any:
    if ref is None:
        return None
    data = ref.data if ref.data is not None else await store.get_blob(run_id, ref.blob)
    return decode_plain(data)


def _message_dict(ref: MessageRef) -> dict[str, Any]:
    # a blob is read only by who asks for it (read_message): listing a log reads no blobs
    if ref.data is None:
        return {"type": ref.type, "blob": ref.blob}
    return {"type": ref.type, "value": decode_plain(ref.data)}


async def read_message(store: Store, run_id: str, record: StepRecord) -> Any:
    """The message ``record``'s step sent, as plain data (``None`` if the record kept none).

    Raises:
        StorageError: it is a blob the store cannot give (pruned, damaged, sealed).
    """
    ref = record.message
    if ref is None:
        return None
    data = ref.data if ref.data is not None else await store.get_blob(run_id, ref.blob)
    return decode_plain(data)


def record_to_dict(record: LogRecord) -> dict[str, Any]:
    """One log record as plain data, its user values decoded."""
    out: dict[str, Any] = plain(msgspec.to_builtins(record))
    match record:
        case StepRecord(result=result, message=message):
            out["result"] = decode_plain(result)
            if message is not None:
                out["message"] = _message_dict(message)
        case PhaseEndRecord(result=result):
            out["result"] = decode_plain(result)
        case MilestoneRecord(data=data):
            out["data"] = decode_plain(data)
        case EventRecord(data=data):
            out["data"] = decode_plain(data)
        case _:
            pass
    return out


async def snapshot_to_dict(store: Store, snapshot: Snapshot) -> dict[str, Any]:
    """A snapshot as readable data: agent states, phase results and step results decoded."""
    out: dict[str, Any] = plain(msgspec.to_builtins(snapshot))
    for name, agent in snapshot.agents.items():
        out["agents"][name]["state"] = await _state_value(store, snapshot.run_id, agent.state)
    out["phases"] = {k: decode_plain(v.result) for k, v in snapshot.phases.items()}
    out["steps"] = [record_to_dict(s) for s in snapshot.steps]
    out["milestones"] = [record_to_dict(m) for m in snapshot.milestones]
    out["events"] = [record_to_dict(e) for e in snapshot.events]
    return out


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing ``validate`` found wrong (``run_id`` is None for an entry that is no run)."""

    run_id: str | None
    what: str
    detail: str


class ValidationReport(msgspec.Struct, kw_only=True):
    """What ``validate`` checked and what it found.

    Attributes:
        sealed: items whose checksums were verified without opening them:
            encrypted with a key the store was not given.
        needs_key: runs not checked at all: encrypted, and their store cannot
            verify sealed data (it is no :class:`~actorflow.storage.SealChecker`).
    """

    runs: int = 0
    records: int = 0
    snapshots: int = 0
    blobs: int = 0
    inbox: int = 0
    sealed: int = 0
    problems: list[Problem] = []
    needs_key: list[str] = []

    @property
    def ok(self) -> bool:
        """True when nothing is corrupt or unreadable."""
        return not self.problems


async def validate_store(
    store: Store,
    run_ids: list[str],
    unreadable: Sequence[UnreadableEntry] = (),
    sealed_runs: Sequence[str] = (),
) -> ValidationReport:
    """Read and verify every record, snapshot and blob of ``run_ids``.

    Every checksum is checked by reading through the store, which verifies
    before it decodes; each failure becomes a :class:`Problem`, and checking
    goes on with the next item. Inboxes are read where the store can name
    their damaged entries (:class:`~actorflow.storage.InboxChecker`). Each of
    ``unreadable`` (what the store's listing skipped) is a problem too. A run
    encrypted with a key the store was not given (each of ``sealed_runs``,
    and any run where a read needs one) has its checksums verified without
    being opened, where the store can (:class:`~actorflow.storage.SealChecker`).
    """
    report = ValidationReport()
    for entry in unreadable:
        report.problems.append(
            Problem(run_id=entry.run_id, what=entry.location, detail=entry.problem)
        )
    for run_id in run_ids:
        part = ValidationReport(runs=1)
        try:
            await _open_all(store, run_id, part)
        except EncryptionKeyError:
            await _verify_sealed(store, run_id, report)  # what was opened counts for nothing
            continue
        _add(report, part)
    for run_id in sealed_runs:
        await _verify_sealed(store, run_id, report)
    return report


async def _open_all(store: Store, run_id: str, report: ValidationReport) -> None:
    """Open every item of the run; stops at the first that needs a key the store lacks.

    Raises:
        EncryptionKeyError: an item is encrypted with a key the store was not given.
    """
    snapshots = live_snapshots(await store.list_snapshots(run_id))
    try:
        report.records += len(await _kept_log(store, run_id, snapshots))
    except EncryptionKeyError:
        raise
    except StorageError as exc:
        report.problems.append(Problem(run_id=run_id, what="log", detail=str(exc)))
    for info in snapshots:
        report.snapshots += 1
        try:
            await read_full_snapshot(store, run_id, info.snapshot_id)
        except EncryptionKeyError:
            raise
        except StorageError as exc:
            what = f"checkpoint {info.snapshot_id}"
            detail = str(exc)
            if not info.durable and isinstance(exc, CorruptedDataError):
                detail = f"{_TORN} {detail}"
            report.problems.append(Problem(run_id=run_id, what=what, detail=detail))
    for ref in await store.list_blobs(run_id):
        report.blobs += 1
        try:
            await store.get_blob(run_id, ref)
        except EncryptionKeyError:
            raise
        except StorageError as exc:
            report.problems.append(Problem(run_id=run_id, what=f"blob {ref}", detail=str(exc)))
    if isinstance(store, InboxChecker):
        check = await store.check_inbox(run_id)
        report.inbox += check.entries
        for location, cause in check.damaged:
            detail = f"{cause}; {_SKIPPED}"
            report.problems.append(Problem(run_id=run_id, what=location, detail=detail))


async def _kept_log(store: Store, run_id: str, snapshots: list[SnapshotInfo]) -> list[LogRecord]:
    """The run's log from where retention left it, which a checkpoint must cover.

    A log pruned below a checkpoint is whole for the run: it recovers from
    that checkpoint. One pruned past its newest checkpoint is not.

    Raises:
        StorageError: a record is damaged, or the log starts after every checkpoint.
    """
    try:
        return await store.read_log(run_id)
    except LogPrunedError as exc:
        if not any(s.position >= exc.first for s in snapshots):
            raise StorageError(
                "read log",
                f"records below position {exc.first} are gone and no checkpoint at or "
                "after it holds what they recorded, so the run cannot be recovered; "
                "restore the log from a backup",
            ) from exc
        return await store.read_log(run_id, exc.first)


async def _verify_sealed(store: Store, run_id: str, report: ValidationReport) -> None:
    report.runs += 1
    if not isinstance(store, SealChecker):
        report.needs_key.append(run_id)
        return
    check: SealCheck = await store.check_sealed(run_id)
    report.records += check.records
    report.snapshots += check.snapshots
    report.blobs += check.blobs
    report.sealed += check.encrypted
    for location, cause in check.problems:
        report.problems.append(Problem(run_id=run_id, what=location, detail=cause))


def _add(report: ValidationReport, part: ValidationReport) -> None:
    report.runs += part.runs
    report.records += part.records
    report.snapshots += part.snapshots
    report.blobs += part.blobs
    report.inbox += part.inbox
    report.problems.extend(part.problems)


async def diff_snapshots(store: Store, a: Snapshot, b: Snapshot) -> dict[str, Any]:
    """What changed from ``a`` to ``b``: agents, state fields, phases, decisions, metrics."""
    agents: dict[str, Any] = {}
    for name in sorted(set(a.agents) | set(b.agents)):
        old, new = a.agents.get(name), b.agents.get(name)
        if old is None or new is None:
            agents[name] = {"change": "added" if old is None else "removed"}
            continue
        change: dict[str, Any] = {}
        for attr in ("status", "confidence", "type"):
            if getattr(old, attr) != getattr(new, attr):
                change[attr] = [plain(getattr(old, attr)), plain(getattr(new, attr))]
        fields = field_changes(
            await _state_value(store, a.run_id, old.state),
            await _state_value(store, b.run_id, new.state),
        )
        if fields:
            change["state"] = fields
        if change:
            agents[name] = {"change": "changed", **change}
    seen = {(d.step_id, d.type) for d in a.decisions}
    metrics = {
        k: [a.metrics.get(k), b.metrics.get(k)]
        for k in sorted(set(a.metrics) | set(b.metrics))
        if a.metrics.get(k) != b.metrics.get(k)
    }
    return {
        "run_id": b.run_id,
        "from": {"checkpoint": a.snapshot_id, "position": a.position, "phase": a.phase},
        "to": {"checkpoint": b.snapshot_id, "position": b.position, "phase": b.phase},
        "status": [str(a.status), str(b.status)] if a.status != b.status else None,
        "agents": agents,
        "phases_finished": sorted(set(b.phases) - set(a.phases)),
        "decisions_added": [_decision(d) for d in b.decisions if (d.step_id, d.type) not in seen],
        "metrics": metrics,
    }


def _decision(d: DecisionRecord) -> dict[str, Any]:
    out: dict[str, Any] = plain(msgspec.to_builtins(d))
    return out
