"""Retention, written once over the ``Store`` protocol so every backend shares it.

``prune`` applies a :class:`RetentionPolicy`; each store's ``prune`` calls
it. Runs with a live owner keep their blobs (a blob is put before the record
that references it is appended, so collecting then would race) and their
data is never deleted on completion. The log is cut only below the oldest
snapshot kept, never for a run without snapshots. Phase ends are kept while
a run is young (``keep_phase_ends``): they are what a fork starts from.

Snapshots may be written without a sync (``SnapshotInfo.durable``), and a
run relies on one only where its log does not reach back (cut, or a fork's
first snapshot), and then on a durable one. So before anything is taken on
the strength of the snapshots kept (the log cut below them, blobs only they
and the log after them reference, a durable snapshot deleted) the **anchor**
is made durable: the newest snapshot that verifies, kept whatever the
policy says (and the oldest kept too, which the cut stops at). Unsynced ones
newer than it that fail their checksum are what a power loss leaves and are
deleted. Deleting an unsynced snapshot needs nothing: the run never relied
on it.

Deletions are not synced, so a power loss may bring one back. That is
harmless. A pass that neither cuts the log nor collects blobs takes nothing
such a snapshot needs. In one that does, a readable snapshot deleted is
older than the anchor, which recovery prefers to it, and one newer than the
anchor was deleted because it fails its checksum, which it still does. The
blobs collected are those that neither the kept snapshots nor the log from
the oldest kept position reference, and every snapshot at or after the
anchor's position references only those (an agent's state there was set by
a record at or after that position, or is the anchor's own), so no snapshot
recovery could pick lacks its blobs.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import TYPE_CHECKING

import anyio

from actorflow._log import get_logger
from actorflow.errors import (
    CheckpointNotFoundError,
    CorruptedDataError,
    NewerFormatError,
    StorageError,
)
from actorflow.storage._history import (
    history_addresses,
    read_full_snapshot,
    resolve_snapshot,
    sync_snapshots,
)
from actorflow.storage._protocol import PruneReport, RetentionPolicy
from actorflow.storage._records import RunManifest, Snapshot, SnapshotInfo, StepRecord

if TYPE_CHECKING:
    from actorflow.storage._protocol import Store

__all__ = [
    "PHASE_END",
    "chosen_snapshots",
    "keeps_every",
    "prune",
    "prune_run",
    "referenced_blobs",
    "run_verifier",
    "verify_store",
]

_log = get_logger(__name__)

PHASE_END = "phase_end"
"""The trigger of the snapshot the engine takes at each phase's end."""


def keeps_every(policy: RetentionPolicy, triggers: list[str]) -> bool:
    """Whether :func:`prune_run` would keep every one of a run's snapshots, knowing only
    their triggers (all of them, oldest first): phase ends, and one newest of another kind.

    What a runtime that wrote all of a finished run's snapshots knows: a prune
    of such a run would only read. False whenever unsure.
    """
    if policy.delete_completed or policy.max_age is not None:
        return False
    if policy.keep_last is None:
        return True  # nothing is counted out
    if not policy.keep_phase_ends:
        return len(triggers) <= policy.keep_last
    others = [t for t in triggers[:-1] if t != PHASE_END]
    return not others or len(triggers) <= policy.keep_last


def chosen_snapshots(
    snapshots: list[SnapshotInfo], policy: RetentionPolicy, now: float, *, run_created: float
) -> list[SnapshotInfo]:
    """Which of a run's snapshots (oldest first) the policy keeps.

    The newest snapshot is always kept: a run never loses its last restart
    point. With ``keep_phase_ends``, so is each phase's end while the run
    (created at ``run_created``) is younger than ``max_age``, or always
    without one: a finished run can still be forked from its middle, and a
    run has one such snapshot per phase.
    """
    if not snapshots:
        return []
    keep = list(snapshots)
    if policy.keep_last is not None:
        if policy.keep_per_phase:
            by_phase: dict[str | None, list[SnapshotInfo]] = defaultdict(list)
            for info in snapshots:
                by_phase[info.phase].append(info)
            keep = [s for group in by_phase.values() for s in group[-policy.keep_last :]]
            if policy.keep_last == 0:
                keep = []
        else:
            keep = snapshots[-policy.keep_last :] if policy.keep_last > 0 else []
    if policy.max_age is not None:
        keep = [s for s in keep if now - s.created <= policy.max_age]
    kept = {s.snapshot_id for s in keep}
    keep.extend(s for s in snapshots[-1:] if s.snapshot_id not in kept)
    if policy.keep_phase_ends and (policy.max_age is None or now - run_created <= policy.max_age):
        kept = {s.snapshot_id for s in keep}
        keep.extend(s for s in snapshots if s.trigger == PHASE_END and s.snapshot_id not in kept)
    return sorted(keep, key=lambda s: (s.position, s.created, s.snapshot_id))


def referenced_blobs(snapshot: Snapshot) -> set[str]:
    """Blob addresses a snapshot refers to (agents' states, steps' new states and messages)."""
    refs = {a.state.blob for a in snapshot.agents.values() if a.state is not None}
    for step in snapshot.steps:
        refs.update(_step_blobs(step))
    return refs


def _step_blobs(step: StepRecord) -> list[str]:
    """Blob addresses a step record refers to: the agent's new state, the message sent."""
    refs = [step.state.blob] if step.state is not None and step.state.blob else []
    if step.message is not None and step.message.blob:
        refs.append(step.message.blob)
    return refs


async def prune(store: Store, policy: RetentionPolicy, *, now: float | None = None) -> PruneReport:
    """Apply ``policy`` to every run of ``store``; return what went.

    Corrupt snapshots met while collecting blobs are reported with a
    ``checkpoint_corrupted`` event and keep every blob (nothing is deleted on
    the strength of unreadable data).
    """
    now = time.time() if now is None else now
    report = PruneReport()
    finished_first: list[tuple[bool, RunManifest]] = []
    for manifest in await store.list_runs():
        if manifest.tombstone:
            continue
        if await store.is_owned(manifest.run_id):
            await _prune_run(store, manifest, policy, now, report, collect_blobs=False)
            finished_first.append((False, manifest))
            continue
        if policy.delete_completed and manifest.status.finished:
            report.bytes_freed += await store.delete_run(manifest.run_id, tombstone=True)
            report.runs_deleted += 1
            continue
        await _prune_run(store, manifest, policy, now, report, collect_blobs=True)
        finished_first.append((manifest.status.finished, manifest))
    if policy.max_total_bytes is not None:
        await _enforce_budget(store, policy.max_total_bytes, finished_first, report)
    _log.info(
        "storage_pruned",
        snapshots=report.snapshots_deleted,
        log_records=report.log_records_deleted,
        blobs=report.blobs_deleted,
        runs=report.runs_deleted,
        bytes=report.bytes_freed,
    )
    return report


async def prune_run(
    store: Store,
    run_id: str,
    policy: RetentionPolicy,
    *,
    now: float | None = None,
    keep_log: bool = False,
) -> PruneReport:
    """Apply ``policy`` to one run (not the store-wide size budget); return what went.

    What the runtime calls when a run finishes: its cost is that of one run,
    however many runs the store holds. With ``keep_log`` only snapshots go:
    the run's decision log, and the blobs its records point at, stay whole.
    """
    now = time.time() if now is None else now
    report = PruneReport()
    manifest = await store.read_run(run_id)
    if manifest.tombstone:
        return report
    deletes_run = policy.delete_completed and manifest.status.finished
    # ownership matters only for what a live owner may still need: the run itself, its blobs
    owned = await store.is_owned(run_id) if deletes_run or not keep_log else False
    if deletes_run and not owned:
        report.bytes_freed += await store.delete_run(run_id, tombstone=True)
        report.runs_deleted += 1
    else:
        await _prune_run(
            store, manifest, policy, now, report, collect_blobs=not owned, keep_log=keep_log
        )
    return report


async def _prune_run(
    store: Store,
    manifest: RunManifest,
    policy: RetentionPolicy,
    now: float,
    report: PruneReport,
    *,
    collect_blobs: bool,
    keep_log: bool = False,
) -> None:
    try:
        await _prune_one(
            store, manifest, policy, now, report, collect_blobs=collect_blobs, keep_log=keep_log
        )
    except NewerFormatError as exc:
        # sound data this code would misjudge (a window it does not know, say): a newer
        # actorflow prunes it
        _log.warning("run_not_pruned", run_id=manifest.run_id, reason=str(exc))


async def _prune_one(
    store: Store,
    manifest: RunManifest,
    policy: RetentionPolicy,
    now: float,
    report: PruneReport,
    *,
    collect_blobs: bool,
    keep_log: bool,
) -> None:
    run_id = manifest.run_id
    snapshots = await store.list_snapshots(run_id)
    keep = chosen_snapshots(snapshots, policy, now, run_created=manifest.created)
    # the log cut and the blobs collected below rest on what is kept
    rests_on_kept = bool(keep) and not keep_log
    if rests_on_kept or _drops_durable(snapshots, keep):
        anchor, torn = await _find_anchor(store, run_id, snapshots)
        for info in torn:
            await _delete(store, run_id, info, report)
        if anchor is None:
            # nothing verifies: whatever the run relies on stays as it is
            _log.warning("run_not_pruned", run_id=run_id, reason="no checkpoint verifies")
            return
        snapshots = [s for s in snapshots if s not in torn]
        keep = chosen_snapshots(snapshots, policy, now, run_created=manifest.created)
        if anchor not in keep:
            keep = sorted([*keep, anchor], key=lambda s: (s.position, s.created, s.snapshot_id))
        relied_on = {anchor.snapshot_id: anchor}
        if rests_on_kept:
            relied_on[keep[0].snapshot_id] = keep[0]
        await sync_snapshots(store, run_id, [k for k, s in relied_on.items() if not s.durable])
    kept_ids = {s.snapshot_id for s in keep}
    for info in snapshots:
        if info.snapshot_id not in kept_ids:
            await _delete(store, run_id, info, report)
    if keep_log:
        return
    log_from = await _log_needed_from(store, run_id, keep)
    if log_from:
        report.log_records_deleted += await store.truncate_log_before(run_id, log_from)
    if collect_blobs:
        await _collect_blobs(store, run_id, keep, log_from, report)


async def _log_needed_from(store: Store, run_id: str, keep: list[SnapshotInfo]) -> int:
    """The first log position the kept snapshots need: the oldest one's, or a window's start.

    A snapshot's window names log records below its position (see
    ``actorflow.storage._history``); a snapshot that cannot be read needs
    nothing (it can never load).
    """
    if not keep:
        return 0
    needed = keep[0].position
    for info in keep:
        try:
            head = await store.read_snapshot(run_id, info.snapshot_id)
        except NewerFormatError:
            raise
        except (CheckpointNotFoundError, CorruptedDataError):
            continue
        if head.window is not None:
            needed = min(needed, head.window.start)
    return needed


def _drops_durable(snapshots: list[SnapshotInfo], keep: list[SnapshotInfo]) -> bool:
    kept_ids = {s.snapshot_id for s in keep}
    return any(s.durable and s.snapshot_id not in kept_ids for s in snapshots)


async def _delete(store: Store, run_id: str, info: SnapshotInfo, report: PruneReport) -> None:
    report.bytes_freed += await store.delete_snapshot(run_id, info.snapshot_id)
    report.snapshots_deleted += 1


async def _find_anchor(
    store: Store, run_id: str, snapshots: list[SnapshotInfo]
) -> tuple[SnapshotInfo | None, list[SnapshotInfo]]:
    """The newest snapshot that verifies, and the unsynced ones after it that do not.

    A durable snapshot that fails is damage, not a power loss's leftover:
    it is reported and kept for ``actorflow validate`` to name.
    """
    torn: list[SnapshotInfo] = []
    for info in reversed(snapshots):
        try:
            await read_full_snapshot(store, run_id, info.snapshot_id)
        except CheckpointNotFoundError:
            continue  # deleted meanwhile
        except NewerFormatError:
            raise
        except CorruptedDataError as exc:
            if info.durable:
                _log.warning(
                    "checkpoint_corrupted",
                    run_id=run_id,
                    checkpoint=info.snapshot_id,
                    error=str(exc),
                )
            else:
                torn.append(info)
            continue
        return info, torn
    return None, torn


async def _collect_blobs(
    store: Store, run_id: str, keep: list[SnapshotInfo], log_from: int, report: PruneReport
) -> None:
    referenced: set[str] = set()
    for info in keep:
        try:
            head = await store.read_snapshot(run_id, info.snapshot_id)
            snapshot = await resolve_snapshot(store, head)
            chunks = await history_addresses(store, head)
        except NewerFormatError:
            raise
        except CorruptedDataError as exc:
            if not info.durable:
                # a power loss's leftover, which can never load: it needs no blob
                await _delete(store, run_id, info, report)
                continue
            _log.warning(
                "checkpoint_corrupted", run_id=run_id, checkpoint=info.snapshot_id, error=str(exc)
            )
            return
        referenced |= referenced_blobs(snapshot)
        referenced.update(chunks)
    try:
        records = await store.read_log(run_id, log_from)
    except StorageError as exc:
        _log.warning("log_unreadable", run_id=run_id, error=str(exc))
        return
    for record in records:
        if isinstance(record, StepRecord):
            referenced.update(_step_blobs(record))
    for ref in await store.list_blobs(run_id):
        if ref not in referenced:
            report.bytes_freed += await store.delete_blob(run_id, ref)
            report.blobs_deleted += 1


async def _enforce_budget(
    store: Store,
    budget: int,
    runs: list[tuple[bool, RunManifest]],
    report: PruneReport,
) -> None:
    """Delete the oldest snapshots, finished runs' first, never a run's newest one.

    Before a run's first durable snapshot goes, its anchor is made durable
    (as in ``_prune_run``), and the anchor itself stays.
    """
    candidates: list[tuple[bool, float, str, SnapshotInfo]] = []
    total = 0
    listed: dict[str, list[SnapshotInfo]] = {}
    for finished, manifest in runs:
        snapshots = listed[manifest.run_id] = await store.list_snapshots(manifest.run_id)
        total += sum(s.stored_size for s in snapshots)
        candidates.extend((not finished, s.created, manifest.run_id, s) for s in snapshots[:-1])
    candidates.sort(key=lambda c: (c[0], c[1]))
    anchors: dict[str, SnapshotInfo | None] = {}
    for _, _, run_id, info in candidates:
        if total <= budget:
            break
        if info.durable:
            if run_id not in anchors:
                anchor, _ = await _find_anchor(store, run_id, listed[run_id])
                if anchor is not None and not anchor.durable:
                    await sync_snapshots(store, run_id, [anchor.snapshot_id])
                anchors[run_id] = anchor
            anchor = anchors[run_id]
            if anchor is None or anchor.snapshot_id == info.snapshot_id:
                continue
        freed = await store.delete_snapshot(run_id, info.snapshot_id)
        total -= info.stored_size
        report.bytes_freed += freed
        report.snapshots_deleted += 1


async def verify_store(store: Store) -> list[CorruptedDataError]:
    """Read and verify every listed snapshot; return the corruption found.

    Each finding is also logged as a ``checkpoint_corrupted`` event.
    """
    found: list[CorruptedDataError] = []
    for manifest in await store.list_runs():
        for info in await store.list_snapshots(manifest.run_id):
            try:
                await read_full_snapshot(store, manifest.run_id, info.snapshot_id)
            except CorruptedDataError as exc:
                _log.error(
                    "checkpoint_corrupted",
                    run_id=manifest.run_id,
                    checkpoint=info.snapshot_id,
                    location=exc.location,
                    cause=exc.cause_text,
                )
                found.append(exc)
    return found


async def run_verifier(
    store: Store,
    *,
    interval: float,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Re-check every snapshot every ``interval`` seconds until cancelled.

    Start it in a task group you own: ``await tg.start(run_verifier, store,
    interval=600)`` returns once the first pass is done. Corruption is reported
    as ``checkpoint_corrupted`` events; the verifier itself never raises for it.
    """
    await verify_store(store)
    task_status.started()
    while True:
        await anyio.sleep(interval)
        await verify_store(store)
