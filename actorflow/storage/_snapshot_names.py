"""Snapshot names that list their snapshot: file names in a file store, keys in S3.

Each snapshot file's name (an S3 key's last part) carries the whole entry
``list_snapshots`` reports, so writing a snapshot is one durable file (its
fsync and its folder's) and deleting one is an unlink: the run's manifest is
not rewritten for either, which halves the fsyncs per snapshot. The name starts as a person reads it
(log position, UTC time, phase, id); after ``~`` come the trigger, the exact
creation time and the stored and raw sizes::

    000000042_20260125T101500Z_draft%230_0003-p42~phase%5Fend~1769335300.123456~512~2048.ckpt

Phase and trigger are percent-encoded (``_`` and ``~`` too), so the name
splits without ambiguity. Snapshots written before this scheme (names without
``~``) are listed by the manifest, as they always were; a snapshot whose entry
would not fit in a file name takes that older path too.
"""

from __future__ import annotations

import re
import time
from urllib.parse import quote, unquote

from actorflow.errors import InvalidNameError
from actorflow.storage._manifests import validate_snapshot_id
from actorflow.storage._records import SnapshotInfo

__all__ = ["SUFFIX", "entry_name", "parse_entry", "snapshot_file_name"]

SUFFIX = ".ckpt"
_MAX_NAME = 240  # bytes; file systems allow 255
_SAFE = "-.,+=@"  # beside letters and digits; quote() never escapes "_.-~"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def _encode(text: str) -> str:
    return quote(text, safe=_SAFE).replace("_", "%5F").replace("~", "%7E")


def entry_name(info: SnapshotInfo) -> str | None:
    """The self-describing file name for ``info``; None if it cannot be one.

    None for an empty phase (indistinguishable from no phase) and for an entry
    too long for a file name: such snapshots are listed by the manifest.
    """
    if info.phase == "":
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(info.created))
    phase = "" if info.phase is None else _encode(info.phase)
    name = (
        f"{info.position:09d}_{stamp}_{phase}_{info.snapshot_id}"
        f"~{_encode(info.trigger)}~{info.created!r}~{info.stored_size}~{info.raw_size}{SUFFIX}"
    )
    return name if len(name.encode()) <= _MAX_NAME else None


def parse_entry(name: str) -> SnapshotInfo | None:
    """The entry a self-describing name carries; None for any other file."""
    if not name.endswith(SUFFIX) or name.startswith("."):
        return None
    fields = name[: -len(SUFFIX)].split("~")
    if len(fields) != 5:
        return None
    head, trigger, created, stored, raw = fields
    parts = head.split("_", 3)
    if len(parts) != 4:
        return None
    position, _stamp, phase, snapshot_id = parts
    try:
        validate_snapshot_id(snapshot_id)
        return SnapshotInfo(
            snapshot_id=snapshot_id,
            position=int(position),
            phase=unquote(phase) if phase else None,
            trigger=unquote(trigger),
            created=float(created),
            stored_size=int(stored),
            raw_size=int(raw),
        )
    except (ValueError, InvalidNameError):
        return None


def snapshot_file_name(info: SnapshotInfo) -> str:
    """The older name, which the manifest lists: log position, UTC time, phase, then the id.

    Example: ``000000042_20260125T101500Z_draft-1_ck-7.ckpt``.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(info.created))
    phase = _UNSAFE.sub("-", info.phase)[:40] if info.phase else "start"
    return f"{info.position:09d}_{stamp}_{phase}_{info.snapshot_id}{SUFFIX}"
