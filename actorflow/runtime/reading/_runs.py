"""What ``actorflow runs`` knows of each run: checkpoints, phase, last activity, owner.

None of it costs the run anything: a run writes its manifest only when its
status changes, so its phase and activity are read from what it writes anyway
(its newest checkpoint, and the log records after it: each step's id names
its phase), and its owner from its claim (a ``flock`` tried and let go, or an
S3 lease). A run whose manifest is
encrypted with a key the store was not given is listed as sealed, with what
the store can tell without the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow.errors import EncryptionKeyError, RunNotFoundError, StorageError
from actorflow.runtime.reading._inspect import live_snapshots
from actorflow.runtime.workflow._ids import phase_of
from actorflow.storage import (
    ClaimInfo,
    ClaimInspector,
    DecisionRecord,
    PhaseEndRecord,
    StepRecord,
    UnreadableLister,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import LogRecord, RunManifest, RunStatus, SnapshotInfo, Store

__all__ = ["ListedRun", "RunProgress", "SealedRun", "list_runs", "run_progress"]

_CONCURRENCY = 16  # runs looked at together: a store's pool, or S3 connections, not flooded


@dataclass(frozen=True, kw_only=True)
class RunProgress:
    """Where a run stands, as the store shows it without running anything.

    Attributes:
        phase: the phase of its newest step, else of its newest checkpoint,
            else the manifest's.
        activity: when it last wrote: its newest log record or checkpoint, or
            its manifest's last change.
        claim: who holds it, and whether that owner is alive.
    """

    phase: str | None
    activity: float
    claim: ClaimInfo


@dataclass(frozen=True, kw_only=True)
class ListedRun:
    """One run ``runs`` lists: its manifest, its checkpoints, where it stands."""

    manifest: RunManifest
    snapshots: list[SnapshotInfo]
    progress: RunProgress


@dataclass(frozen=True, kw_only=True)
class SealedRun:
    """A run whose manifest is encrypted with a key the store was not given."""

    run_id: str
    key_id: str
    claim: ClaimInfo


async def run_progress(
    store: Store, manifest: RunManifest, snapshots: list[SnapshotInfo]
) -> RunProgress:
    """Phase, last activity and owner of a run, from what it writes anyway.

    A run that has not finished is read further: the log records after its
    newest checkpoint name the phase of each step (a phase's start coalesces
    with the previous phase's end when nothing was logged between them, so
    no checkpoint may name the phase the run is in) and when it was done.
    The owner comes from the store's :class:`~actorflow.storage.ClaimInspector`,
    else from the manifest and ``is_owned``.
    """
    live = live_snapshots(snapshots)
    newest = live[-1] if live else None
    phase = newest.phase if newest is not None and newest.phase is not None else manifest.phase
    activity = max(manifest.created, manifest.updated, newest.created if newest else 0.0)
    if not manifest.status.finished:  # a finished run's manifest says where it ended
        for record in await _tail(store, manifest.run_id, newest):
            phase = _phase_after(record, phase)
            activity = max(activity, record.time)
    if isinstance(store, ClaimInspector):
        claim = await store.read_claim(manifest.run_id)
        if claim.owner is None:
            claim = msgspec.structs.replace(claim, owner=manifest.owner)
    else:
        claim = ClaimInfo(owner=manifest.owner, alive=await store.is_owned(manifest.run_id))
    return RunProgress(phase=phase, activity=activity, claim=claim)


async def _tail(store: Store, run_id: str, newest: SnapshotInfo | None) -> list[LogRecord]:
    try:
        # only the records since the newest checkpoint: a few, however long the run
        return await store.read_log(run_id, newest.position if newest is not None else 0)
    except StorageError:
        return []  # pruned meanwhile, damaged (validate names it) or sealed: no tail to read


def _phase_after(record: LogRecord, phase: str | None) -> str | None:
    """The run's phase once ``record`` was logged."""
    match record:
        case StepRecord(step_id=step_id) | DecisionRecord(step_id=step_id):
            return phase_of(step_id) or phase
        case PhaseEndRecord(name=name):
            return name  # ended: the next phase shows with its first step
        case _:
            return phase


async def list_runs(
    store: Store,
    *,
    status: Sequence[RunStatus] | None = None,
    workflow: str | None = None,
    queue: str | None = None,
) -> tuple[list[ListedRun], list[SealedRun]]:
    """The runs that match, oldest first, and the runs sealed with a key the store lacks.

    Sealed runs cannot be filtered (their status and workflow are sealed);
    they are returned whatever the filters, for the caller to say so.
    ``queue``: only runs submitted to that queue.
    """
    manifests = await store.list_runs(status=status, workflow=workflow)
    if queue is not None:
        manifests = [m for m in manifests if m.queue == queue]
    unreadable = await store.list_unreadable() if isinstance(store, UnreadableLister) else []
    sealed = [(e.run_id, e.key_id) for e in unreadable if e.run_id and e.key_id]
    listed: dict[str, ListedRun] = {}
    found: dict[str, SealedRun] = {}
    limit = anyio.CapacityLimiter(_CONCURRENCY)

    async def one(m: RunManifest) -> None:
        async with limit:
            snapshots = await store.list_snapshots(m.run_id)
            progress = await run_progress(store, m, snapshots)
        listed[m.run_id] = ListedRun(manifest=m, snapshots=snapshots, progress=progress)

    async def one_sealed(run_id: str, key_id: str) -> None:
        async with limit:
            claim = await _sealed_claim(store, run_id)
        found[run_id] = SealedRun(run_id=run_id, key_id=key_id, claim=claim)

    async with anyio.create_task_group() as tg:
        for m in manifests:
            tg.start_soon(one, m)
        for run_id, key_id in sealed:
            tg.start_soon(one_sealed, run_id, key_id)
    runs = [listed[m.run_id] for m in manifests]
    return runs, [found[run_id] for run_id, _ in sealed if run_id in found]


async def _sealed_claim(store: Store, run_id: str) -> ClaimInfo:
    # a file store's flock needs no key: whether a live process holds the run still shows
    if not isinstance(store, ClaimInspector):
        return ClaimInfo()
    try:
        return await store.read_claim(run_id)
    except (EncryptionKeyError, RunNotFoundError):
        return ClaimInfo()
