"""An S3 store's ``check_sealed``: every object of a run verified, nothing decrypted.

One LIST under the run's prefix, then the objects, read concurrently; each
envelope's checksum is verified (:meth:`~actorflow.storage.SealCheck.verify`),
and log segments are split into their records first (:func:`._log.split_frames`).
Nothing is opened, so it needs no key and never reads the manifest's contents.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal

from actorflow.errors import LogCorruptedError
from actorflow.storage._capabilities import SealCheck
from actorflow.storage._envelope import Kind
from actorflow.storage._manifests import blob_addresses
from actorflow.storage.s3._log import split_frames

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["check_run"]

_Part = Literal["records", "snapshots", "blobs", "other"]


def _what(rest: str, blobs: set[str]) -> tuple[Kind, _Part] | None:
    """The kind of the object at ``rest`` under a run's prefix, or None if it holds no envelope."""
    head, _, name = rest.partition("/")
    if rest == "manifest":
        return Kind.MANIFEST, "other"
    if rest == "lease":
        return Kind.LEASE, "other"
    if head == "log" and name.isdigit():
        return Kind.LOG_RECORD, "records"
    if head == "snapshots" and name:
        return Kind.SNAPSHOT, "snapshots"
    if head == "blobs" and name in blobs:
        return Kind.BLOB, "blobs"
    if head == "inbox" and name.isdigit():
        return Kind.INBOX_ENTRY, "other"
    return None  # log-start (a number), inbox-ids (empty), and objects actorflow did not write


async def check_run(objects: S3Objects, codec: Codec, run_id: str) -> SealCheck:
    """Verify the run's manifest, lease, log segments, snapshots, blobs and inbox entries."""
    prefix = objects.key(run_id, "")
    listed = await objects.list_objects("check run", prefix)
    folder = objects.key(run_id, "blobs", "")
    names = [o.key[len(folder) :] for o in listed if o.key.startswith(folder)]
    # as list_blobs does: what is not a blob address is not ours (a warning names it)
    blobs = set(blob_addresses(names, objects.location(folder.rstrip("/"))))
    wanted = [
        (o.key, what) for o in listed if (what := _what(o.key[len(prefix) :], blobs)) is not None
    ]
    bodies = await objects.gather([partial(objects.get_or_none, "check run", k) for k, _ in wanted])
    check = SealCheck()
    for (key, (kind, part)), body in zip(wanted, bodies, strict=True):
        if body is None:
            continue  # pruned while we looked
        location = objects.location(key)
        if kind is not Kind.LOG_RECORD:
            check.verify(codec, body, kind=kind, part=part, location=location)
            continue
        try:
            records = split_frames(body, location)
        except LogCorruptedError as exc:
            check.problems.append((exc.location, exc.cause_text))
            continue
        start = int(key.rpartition("/")[2])
        for i, sealed in enumerate(records):
            where = f"{location} (position {start + i})"
            check.verify(codec, sealed, kind=kind, part=part, location=where)
    return check
