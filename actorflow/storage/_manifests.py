"""Small pure helpers every store shares: ids, manifest entries, tombstones, filters."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import InvalidNameError, StorageError
from actorflow.storage._records import (
    RunManifest,
    RunStatus,
    Snapshot,
    SnapshotInfo,
    SnapshotStatus,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "add_snapshot",
    "live_snapshots",
    "mark_snapshot",
    "matches",
    "snapshot_info",
    "tombstone",
    "validate_blob_ref",
    "validate_snapshot_id",
]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_BLOB = re.compile(r"(?:[A-Za-z0-9_.\-]{1,64}\.)?[0-9a-f]{64}")


class _SnapshotIdError(InvalidNameError):
    kind = "checkpoint id"


def validate_snapshot_id(snapshot_id: str) -> str:
    """Return ``snapshot_id`` if it is safe as a file name and a key part, else raise.

    Raises:
        InvalidNameError: unsafe characters, empty, too long, or ``..``.
    """
    if not isinstance(snapshot_id, str) or not _NAME.fullmatch(snapshot_id) or ".." in snapshot_id:
        raise _SnapshotIdError(snapshot_id, "not a safe file name")
    return snapshot_id


def validate_blob_ref(ref: str) -> str:
    """Return ``ref`` if it looks like an address ``put_blob`` made, else raise StorageError."""
    if not isinstance(ref, str) or not _BLOB.fullmatch(ref) or ".." in ref:
        raise StorageError("blob", f"{ref!r} is not a blob address returned by put_blob")
    return ref


def snapshot_info(snapshot: Snapshot, *, stored_size: int, raw_size: int) -> SnapshotInfo:
    """The manifest's entry for a snapshot just written."""
    return SnapshotInfo(
        snapshot_id=snapshot.snapshot_id,
        position=snapshot.position,
        phase=snapshot.phase,
        trigger=snapshot.trigger,
        created=snapshot.created,
        stored_size=stored_size,
        raw_size=raw_size,
    )


def add_snapshot(manifest: RunManifest, info: SnapshotInfo) -> RunManifest:
    """The manifest with ``info`` listed (replacing an entry with the same id)."""
    kept = tuple(s for s in manifest.snapshots if s.snapshot_id != info.snapshot_id)
    return msgspec.structs.replace(manifest, snapshots=(*kept, info), updated=time.time())


def mark_snapshot(manifest: RunManifest, snapshot_id: str, status: SnapshotStatus) -> RunManifest:
    """The manifest with one snapshot's lifecycle status changed."""
    snaps = tuple(
        msgspec.structs.replace(s, status=status) if s.snapshot_id == snapshot_id else s
        for s in manifest.snapshots
    )
    return msgspec.structs.replace(manifest, snapshots=snaps, updated=time.time())


def live_snapshots(manifest: RunManifest) -> list[SnapshotInfo]:
    """Snapshots that exist, oldest first (by position, then time)."""
    live = [s for s in manifest.snapshots if s.status is SnapshotStatus.CREATED]
    return sorted(live, key=lambda s: (s.position, s.created, s.snapshot_id))


def tombstone(manifest: RunManifest) -> RunManifest:
    """What stays of a deleted run: its status and result, so its id is never reused."""
    snaps = tuple(
        msgspec.structs.replace(s, status=SnapshotStatus.DELETED)
        if s.status is SnapshotStatus.CREATED
        else s
        for s in manifest.snapshots
    )
    return msgspec.structs.replace(
        manifest, tombstone=True, snapshots=snaps, owner=None, updated=time.time()
    )


def matches(
    manifest: RunManifest,
    status: RunStatus | Sequence[RunStatus] | None,
    workflow: str | None,
) -> bool:
    """Whether ``manifest`` passes ``list_runs``' filters."""
    if workflow is not None and manifest.workflow != workflow:
        return False
    if status is None:
        return True
    if isinstance(status, RunStatus):
        return manifest.status is status
    return manifest.status in status
