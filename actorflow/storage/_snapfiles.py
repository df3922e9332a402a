"""A file store run's snapshots folder, which lists itself.

Each snapshot file's name carries the whole entry ``list_snapshots`` reports,
so writing a snapshot is one durable file (its fsync and its folder's) and
deleting one is an unlink: the run's manifest is not rewritten for either,
which halves the fsyncs per snapshot. The name starts as a person reads it
(log position, UTC time, phase, id); after ``~`` come the trigger, the exact
creation time and the stored and raw sizes::

    000000042_20260125T101500Z_draft%230_0003-p42~phase%5Fend~1769335300.123456~512~2048.ckpt

Phase and trigger are percent-encoded (``_`` and ``~`` too), so the name
splits without ambiguity. Snapshots written before this scheme (names without
``~``) are listed by the manifest, as they always were; a snapshot whose entry
would not fit in a file name takes that older path too.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from actorflow.errors import InvalidNameError
from actorflow.storage._fs import write_atomic
from actorflow.storage._manifests import validate_snapshot_id
from actorflow.storage._records import SnapshotInfo

if TYPE_CHECKING:
    from actorflow.storage._fs import FileSystem

__all__ = ["SnapshotFolder", "entry_name", "parse_entry"]

_SUFFIX = ".ckpt"
_MAX_NAME = 240  # bytes; file systems allow 255
_SAFE = "-.,+=@"  # beside letters and digits; quote() never escapes "_.-~"


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
        f"~{_encode(info.trigger)}~{info.created!r}~{info.stored_size}~{info.raw_size}{_SUFFIX}"
    )
    return name if len(name.encode()) <= _MAX_NAME else None


def parse_entry(name: str) -> SnapshotInfo | None:
    """The entry a self-describing name carries; None for any other file."""
    if not name.endswith(_SUFFIX) or name.startswith("."):
        return None
    fields = name[: -len(_SUFFIX)].split("~")
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


class SnapshotFolder:
    """The self-listing snapshots of one run, in ``path``. Called from worker threads."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path

    def entries(self) -> dict[str, tuple[str, SnapshotInfo]]:
        """``{snapshot id: (file name, entry)}``; of two files with one id, the newer."""
        found: dict[str, tuple[str, SnapshotInfo]] = {}
        for name in self.fs.listdir(self.path):
            info = parse_entry(name)
            if info is None:
                continue
            seen = found.get(info.snapshot_id)
            if seen is None or (seen[1].created, seen[0]) < (info.created, name):
                found[info.snapshot_id] = (name, info)
        return found

    def named(self, snapshot_id: str) -> list[str]:
        """The files of one snapshot id (usually one), without parsing every name."""
        return self.find(snapshot_id)[0]

    def find(self, snapshot_id: str) -> tuple[list[str], bool]:
        """The self-listing files of one id, and whether an older-style file may hold it.

        A snapshot the manifest lists (written the older way) is named
        ``..._<id>.ckpt``; a folder with no such name spares the caller a read
        of the manifest, which every new snapshot's write would otherwise pay.
        """
        # an id sits between the phase's "_" and the first "~" (neither can be in it)
        marker, older = f"_{snapshot_id}~", f"_{snapshot_id}{_SUFFIX}"
        names = self.fs.listdir(self.path)
        own = [
            name
            for name in names
            if marker in name
            and (info := parse_entry(name)) is not None
            and info.snapshot_id == snapshot_id
        ]
        return own, any(name.endswith(older) for name in names)

    def write(self, name: str, sealed: bytes) -> None:
        """Write one snapshot durably (its file, then the folder's entry)."""
        write_atomic(self.fs, os.path.join(self.path, name), sealed)

    def remove(self, snapshot_id: str) -> int | None:
        """Delete a snapshot durably; its size, or None if no file has that id."""
        doomed = self.named(snapshot_id)
        if not doomed:
            return None
        freed = 0
        for n in doomed:
            path = os.path.join(self.path, n)
            try:
                freed += self.fs.size(path)
            except FileNotFoundError:
                continue
            self.fs.unlink(path)
        self.fs.fsync_dir(self.path)
        return freed
