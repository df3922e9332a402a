"""A file store's ``check_sealed``: every file of a run verified, nothing decrypted.

It walks the run's folder as :mod:`._layout` lays it out and checks each
envelope's checksum (:meth:`~actorflow.storage.SealCheck.verify`); the log's
segments are split into frames first, as a reader would (:mod:`._frames`), so
a torn tail is left out and each damaged record is named. Nothing is opened,
so it needs no key and never depends on the manifest being readable.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

from actorflow.errors import LogCorruptedError, UnreadableFileError
from actorflow.storage._capabilities import SealCheck
from actorflow.storage._envelope import Kind
from actorflow.storage._manifests import blob_addresses
from actorflow.storage._snapshot_names import SUFFIX
from actorflow.storage.file._frames import scan
from actorflow.storage.file._inbox import stored_entries
from actorflow.storage.file._log import is_segment

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["check_run"]


def check_run(folders: RunFolders, codec: Codec, run_id: str) -> SealCheck:
    """Verify the run's manifest, owner file, log, snapshots, blobs and inbox. Blocks.

    Raises:
        RunNotFoundError: the run has no manifest.
    """
    folders.require(run_id)
    fs = folders.fs
    check = SealCheck()
    for name, kind in (("manifest", Kind.MANIFEST), ("owner", Kind.LEASE)):
        path = folders.run(run_id, name)
        try:
            data = fs.read(path)
        except FileNotFoundError:
            continue  # a run never claimed has no owner file
        except UnreadableFileError as exc:  # a FIFO or a device: named, never read
            check.other += 1
            check.problems.append((exc.location, exc.cause_text))
            continue
        check.verify(codec, data, kind=kind, part="other", location=path)
    _check_log(folders, codec, run_id, check)
    _check_files(folders, codec, run_id, check, "snapshots")
    _check_files(folders, codec, run_id, check, "blobs")
    for _, path, entry in stored_entries(folders, run_id):
        if isinstance(entry, UnreadableFileError):
            check.other += 1
            check.problems.append((path, entry.cause_text))
        else:
            check.verify(codec, entry, kind=Kind.INBOX_ENTRY, part="other", location=path)
    return check


def _check_files(
    folders: RunFolders,
    codec: Codec,
    run_id: str,
    check: SealCheck,
    part: Literal["snapshots", "blobs"],
) -> None:
    kind = Kind.SNAPSHOT if part == "snapshots" else Kind.BLOB
    folder = folders.run(run_id, part)
    names = [n for n in sorted(folders.fs.listdir(folder)) if not n.startswith(".")]  # temp files
    if part == "blobs":
        names = blob_addresses(names, folder)  # others are not ours: left alone, with a warning
    for name in names:
        if part == "snapshots" and not name.endswith(SUFFIX):
            continue
        path = os.path.join(folder, name)
        try:
            data = folders.fs.read(path)
        except FileNotFoundError:
            continue  # pruned while we looked
        except UnreadableFileError as exc:
            setattr(check, part, getattr(check, part) + 1)
            check.problems.append((exc.location, exc.cause_text))
            continue
        check.verify(codec, data, kind=kind, part=part, location=path)


def _check_log(folders: RunFolders, codec: Codec, run_id: str, check: SealCheck) -> None:
    folder = folders.run(run_id, "log")
    names = sorted(n for n in folders.fs.listdir(folder) if is_segment(n))
    for i, name in enumerate(names):
        path = os.path.join(folder, name)
        last = i == len(names) - 1
        try:
            found = scan(folders.fs.read(path), location=path, last=last, measure=codec.measure)
        except FileNotFoundError:
            continue  # pruned while we looked
        except (LogCorruptedError, UnreadableFileError) as exc:
            # damage that hides where the records after it start, or no file to read
            check.problems.append((exc.location, exc.cause_text))
            continue
        for n, payload in enumerate(found.payloads):
            where = found.where(path, n)
            if payload is None:  # a damaged frame whose end is known: the others still count
                check.records += 1
                check.problems.append((where, found.damaged[n]))
                continue
            check.verify(
                codec, bytes(payload), kind=Kind.LOG_RECORD, part="records", location=where
            )
