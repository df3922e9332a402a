"""Small pure helpers every store shares: ids, manifest entries, tombstones, filters."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import msgspec

from actorflow._log import get_logger
from actorflow.errors import (
    EncryptionKeyMissingError,
    InvalidNameError,
    InvalidRunIdError,
    StorageError,
)
from actorflow.storage._protocol import UnreadableEntry
from actorflow.storage._records import (
    RunManifest,
    RunStatus,
    Snapshot,
    SnapshotInfo,
    SnapshotStatus,
    validate_run_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from actorflow.errors import CorruptedDataError, EncryptionKeyError

__all__ = [
    "add_snapshot",
    "blob_addresses",
    "corrupt_manifest",
    "data_without_manifest",
    "encrypted_manifest",
    "index_run_ids",
    "index_strays",
    "live_snapshots",
    "mark_snapshot",
    "matches",
    "not_a_run",
    "snapshot_info",
    "tombstone",
    "validate_blob_ref",
    "validate_snapshot_id",
    "warn_unreadable",
]

_log = get_logger(__name__)

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


def blob_addresses(names: Iterable[str], folder: str) -> list[str]:
    """The ``names`` that are blob addresses; any other is skipped with a ``blob_foreign`` warning.

    Retention deletes what it lists, so a file actorflow did not write must
    never be listed, nor stop the listing of the others.
    """
    kept = []
    for name in names:
        if _BLOB.fullmatch(name) and ".." not in name:
            kept.append(name)
        else:
            _log.warning(
                "blob_foreign",
                location=f"{folder}/{name}",
                problem="not a blob actorflow wrote; left alone (move it out of the store)",
            )
    return kept


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


def not_a_run(location: str) -> UnreadableEntry:
    """An entry among the runs whose name is not a run id (``lost+found``, a stray file)."""
    return UnreadableEntry(
        location=location,
        problem="not a run (its name is not a run id, or it is not a folder); "
        "move it out of the store's runs",
    )


def corrupt_manifest(run_id: str, exc: CorruptedDataError) -> UnreadableEntry:
    """A run whose manifest fails its checksum or does not decode."""
    return UnreadableEntry(
        location=exc.location,
        run_id=run_id,
        problem=f"the run's manifest is corrupt ({exc.cause_text}), so the run is not "
        "listed or recovered; restore the manifest from a backup, or move the run's "
        "folder out of the store",
    )


def encrypted_manifest(run_id: str, location: str, exc: EncryptionKeyError) -> UnreadableEntry:
    """A run whose manifest is encrypted with a key the store was not given, or a wrong one."""
    which = "was not given" if isinstance(exc, EncryptionKeyMissingError) else "has wrong"
    return UnreadableEntry(
        location=location,
        run_id=run_id,
        key_id=exc.key_id,
        problem=f"the run's manifest is encrypted with key {exc.key_id!r}, which this store "
        f"{which}, so the run is not listed or recovered; open the store with that key: "
        "ACTORFLOW_KEYS or ACTORFLOW_KEY_FILE, Codec(keys={...}) in code, or --key-file "
        "FILE for the commands that read a store",
    )


def data_without_manifest(run_id: str, location: str) -> UnreadableEntry:
    """A run's data whose manifest is missing (deleted or lost)."""
    return UnreadableEntry(
        location=location,
        run_id=run_id,
        problem="run data without a manifest (deleted or lost), so the run is not listed "
        "or recovered and its id cannot start a new run; restore the manifest from a "
        "backup, or move the data out of the store",
    )


def _is_run_id(name: str) -> bool:
    try:
        validate_run_id(name)
    except InvalidRunIdError:
        return False
    return True


def index_run_ids(
    names: Iterable[str], location: Callable[[str], str], warned: set[str]
) -> list[str]:
    """The ``names`` in an index of unfinished runs that are run ids.

    An index entry is a hint, so one that names no run id (only another hand
    puts one there) is skipped: an ``index_entry_invalid`` warning the first
    time (``warned`` holds the names warned of), and ``actorflow validate``
    names it (:func:`index_strays`).
    """
    kept = []
    for name in names:
        if _is_run_id(name):
            kept.append(name)
        elif name not in warned:
            warned.add(name)
            _log.warning("index_entry_invalid", location=location(name), problem=_STRAY)
    return kept


def index_strays(names: Iterable[str], location: Callable[[str], str]) -> list[UnreadableEntry]:
    """The entries of an index of unfinished runs that name no run id, each a problem."""
    return [
        UnreadableEntry(location=location(name), problem=_STRAY)
        for name in names
        if not _is_run_id(name)
    ]


_STRAY = (
    "not a run id, in the store's index of unfinished runs (where only actorflow "
    "writes), so it is skipped; remove it"
)


def warn_unreadable(entries: Sequence[UnreadableEntry]) -> None:
    """Log each entry ``list_runs`` skips, so one damaged entry never hides the others."""
    for entry in entries:
        _log.warning(
            "run_unreadable",
            location=entry.location,
            run_id=entry.run_id,
            key_id=entry.key_id,
            problem=entry.problem,
        )
