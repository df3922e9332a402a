"""Snapshot names that list their snapshot: file names in a file store, keys in S3.

Each snapshot file's name (an S3 key's last part) carries the whole entry
``list_snapshots`` reports, so writing a snapshot is one file (one PUT) and
deleting one is an unlink: the run's manifest is not rewritten for either.
(The file store marks a name ``~unsynced`` until the snapshot is synced, on
top of this scheme: see ``storage/file/_snapshots.py``.) The name starts as a person reads it
(log position, UTC time, phase, id); after ``~`` come the trigger, the exact
creation time and the stored and raw sizes::

    000000042_20260125T101500Z_draft%230_0003-p42~phase%5Fend~1769335300.123456~512~2048.ckpt

Phase and trigger are percent-encoded (``_`` and ``~`` too), so the name
splits without ambiguity.

With encryption on, a name carries no text of the user's: the phase and the
trigger (which holds a ``ctx.checkpoint(reason)`` text) are sealed with the
store's key into a label, bound to the run and the snapshot id, and the phase's
place reads ``sealed``::

    000000042_20260125T101500Z_sealed_0003-p42~k1~<label, base64url>~1769335300.123456~512~2048.ckpt

The label is in the name rather than only in the snapshot so that listing
stays one directory read (or one LIST) that needs no snapshot's bytes:
recovery, retention (phase ends, ``keep_per_phase``) and ``actorflow
checkpoints`` list with the key exactly as without encryption. The label's text
is padded to a multiple of 16 bytes, so its length tells little. A store
without the key lists such a snapshot with the trigger ``sealed`` and no phase.

Snapshots written before this scheme (names without ``~``) are listed by the
manifest, as they always were; a snapshot whose entry would not fit in a file
name takes that older path too (with encryption on, its name has ``sealed`` for
the phase; the manifest it is listed in is sealed).
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
import time
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import msgspec

from actorflow.errors import InvalidNameError
from actorflow.storage._manifests import validate_snapshot_id
from actorflow.storage._records import SnapshotInfo

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec

__all__ = [
    "SEALED",
    "SUFFIX",
    "SnapshotNames",
    "entry_name",
    "listed_names",
    "parse_entry",
    "snapshot_file_name",
]

SUFFIX = ".ckpt"
SEALED = "sealed"
"""The phase's place in a sealed name; the trigger listed when a label cannot be opened."""

_MAX_NAME = 240  # bytes; file systems allow 255
_SAFE = "-.,+=@"  # beside letters and digits; quote() never escapes "_.-~"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")
_PAD = 16
_COUNT = re.compile(r"[0-9]+")
_TIME = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?")
"""A creation time as ``repr(float)`` writes it (not negative; never ``nan`` or ``inf``)."""
_Label = tuple[str | None, str, bytes]  # phase, trigger, padding
_label_decoder = msgspec.msgpack.Decoder(_Label)


class SnapshotNames:
    """The names of one store's snapshots, sealed when its codec encrypts.

    Reads every kind of name whatever the codec: plain ones, sealed ones, and
    the older names the manifest lists.
    """

    def __init__(self, codec: Codec) -> None:
        self._codec = codec

    def entry(self, run_id: str, info: SnapshotInfo) -> str | None:
        """The self-describing name of ``info`` in run ``run_id``; None if it cannot be one.

        None for an entry too long for a file name (and, without encryption,
        for an empty phase): such snapshots are listed by the manifest.
        """
        sealed = self._codec.seal_label(_label(info), run_id=run_id, slot=_slot(info.snapshot_id))
        if sealed is None:
            return entry_name(info)
        key_id, body = sealed
        token = base64.urlsafe_b64encode(body).rstrip(b"=").decode()
        name = (
            f"{info.position:09d}_{_stamp(info)}_{SEALED}_{info.snapshot_id}~{_encode(key_id)}"
            f"~{token}~{info.created!r}~{info.stored_size}~{info.raw_size}{SUFFIX}"
        )
        return name if len(name.encode()) <= _MAX_NAME else None

    def parse(self, run_id: str, name: str) -> SnapshotInfo | None:
        """The entry a self-describing name of run ``run_id`` carries; None for any other file."""
        fields = _fields(name)
        if fields is None or len(fields) != 6:
            return parse_entry(name)
        head, key_id, token, created, stored, raw = fields
        parts = head.split("_", 3)
        if len(parts) != 4 or parts[2] != SEALED:
            return None
        position, _stamp_text, _sealed, snapshot_id = parts
        phase, trigger = self._open(run_id, snapshot_id, _unquote(key_id), token)
        return _info(snapshot_id, position, phase, trigger, created, stored, raw)

    def listed(self, info: SnapshotInfo) -> str:
        """The name of a snapshot the manifest lists, as this store writes it."""
        return snapshot_file_name(info, sealed=self._codec.encrypted)

    def _open(
        self, run_id: str, snapshot_id: str, key_id: str, token: str
    ) -> tuple[str | None, str]:
        try:
            body = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            return None, SEALED
        text = self._codec.open_label(key_id, body, run_id=run_id, slot=_slot(snapshot_id))
        if text is None:
            return None, SEALED
        try:
            phase, trigger, _padding = _label_decoder.decode(text)
        except msgspec.DecodeError:
            return None, SEALED
        return phase, trigger


def listed_names(info: SnapshotInfo) -> tuple[str, str]:
    """Every name a snapshot the manifest lists may have: written sealed, or not."""
    return snapshot_file_name(info, sealed=True), snapshot_file_name(info, sealed=False)


def entry_name(info: SnapshotInfo) -> str | None:
    """The plain self-describing file name for ``info``; None if it cannot be one.

    None for an empty phase (indistinguishable from no phase) and for an entry
    too long for a file name: such snapshots are listed by the manifest.
    """
    if info.phase == "":
        return None
    phase = "" if info.phase is None else _encode(info.phase)
    name = (
        f"{info.position:09d}_{_stamp(info)}_{phase}_{info.snapshot_id}"
        f"~{_encode(info.trigger)}~{info.created!r}~{info.stored_size}~{info.raw_size}{SUFFIX}"
    )
    return name if len(name.encode()) <= _MAX_NAME else None


def parse_entry(name: str) -> SnapshotInfo | None:
    """The entry a plain self-describing name carries; None for any other file."""
    fields = _fields(name)
    if fields is None or len(fields) != 5:
        return None
    head, trigger, created, stored, raw = fields
    parts = head.split("_", 3)
    if len(parts) != 4:
        return None
    position, _stamp_text, phase, snapshot_id = parts
    phase_text = _unquote(phase) if phase else None
    return _info(snapshot_id, position, phase_text, _unquote(trigger), created, stored, raw)


def snapshot_file_name(info: SnapshotInfo, *, sealed: bool = False) -> str:
    """The older name, which the manifest lists: log position, UTC time, phase, then the id.

    Example: ``000000042_20260125T101500Z_draft-1_ck-7.ckpt``; with ``sealed``
    the phase reads ``sealed``.
    """
    phase = _UNSAFE.sub("-", info.phase)[:40] if info.phase else "start"
    if sealed:
        phase = SEALED
    return f"{info.position:09d}_{_stamp(info)}_{phase}_{info.snapshot_id}{SUFFIX}"


# a run's names repeat a few phases and triggers: listing thousands of
# snapshots parsed each of them again
_unquote = functools.lru_cache(maxsize=1024)(unquote)


def _encode(text: str) -> str:
    return quote(text, safe=_SAFE).replace("_", "%5F").replace("~", "%7E")


def _stamp(info: SnapshotInfo) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(info.created))


def _slot(snapshot_id: str) -> str:
    # not "snapshot/<id>", the snapshot's own slot: a label never opens as a snapshot
    return f"snapshot-name/{snapshot_id}"


def _label(info: SnapshotInfo) -> bytes:
    bare = msgspec.msgpack.encode((info.phase, info.trigger, b""))
    # bin8 holds up to 255 bytes, so padding never changes the header's size
    return msgspec.msgpack.encode((info.phase, info.trigger, bytes(-len(bare) % _PAD)))


def _finite(value: float) -> float:
    if not math.isfinite(value):  # "1e999" matches _TIME and is infinite
        raise ValueError(value)
    return value


def _fields(name: str) -> list[str] | None:
    if not name.endswith(SUFFIX) or name.startswith("."):
        return None
    return name[: -len(SUFFIX)].split("~")


def _info(
    snapshot_id: str,
    position: str,
    phase: str | None,
    trigger: str,
    created: str,
    stored: str,
    raw: str,
) -> SnapshotInfo | None:
    # only what entry_name writes: float() and int() alone take "nan", "inf",
    # "-1", " 1" and "1_000", which no snapshot was written with
    if not _TIME.fullmatch(created) or not all(map(_COUNT.fullmatch, (position, stored, raw))):
        return None
    try:
        validate_snapshot_id(snapshot_id)
        return SnapshotInfo(
            snapshot_id=snapshot_id,
            position=int(position),
            phase=phase,
            trigger=trigger,
            created=_finite(float(created)),
            stored_size=int(stored),
            raw_size=int(raw),
        )
    except (ValueError, InvalidNameError):
        return None
