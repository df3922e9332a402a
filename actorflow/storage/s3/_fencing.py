"""Fencing on S3: take-over records, segment epochs, and what a stale owner may not write.

A lease says who *should* own a run, by the clocks of the processes that read
it; it cannot stop a process that slept past its lease (a pause, SIGSTOP, a
lagging clock) from writing when it wakes. The log positions do:

- Every claim that replaces an earlier owner (epoch > 1) writes a take-over
  record, an ``EventRecord`` of kind ``takeover`` carrying (owner, epoch), at
  the log's end, with ``If-None-Match: *`` like every segment. It serialises
  against the stale owner's appends: whatever the stale owner wrote before it
  is history the new owner reads; nothing can be written at its position.
- Every segment carries the epoch it was written under (``af-epoch``) and the
  take-over epoch its writer enforces (``af-fence``, on segments written since
  take-over records exist). A writer that finds a newer epoch where it meant
  to write (after a 412) or at the log's end (when it reads where that is) is
  fenced: ``LeaseLostError``, never a retry further on. A stale owner always
  finds one: the position it remembers is at or before the take-over record,
  and a position read from the log's end comes after the newer epoch's
  segments.
- Readers drop the records of a segment whose epoch is lower than a take-over
  before it (or than the ``af-fence`` of a kept segment before it): they are
  read as ``stale_write`` events, so positions stay where every store keeps
  them. Writers that follow these rules never leave such a segment; an older
  actorflow, still running as a stale owner, could.
- The manifest records the epoch of the last owner that replaced it
  (``RunManifest.epoch``, in its sealed bytes, so a new epoch always moves the
  ETag); a claim that takes the run over writes its own at once. A stale
  owner's compare-and-swap then fails, and the manifest it reads back names a
  newer epoch: it is fenced, and never records a status over the new owner's.

A writer without a lease (not an owner: tests, tools) is never fenced; its
segments take the newest fence it has seen, so readers keep them. A log with
no take-over record (written before they existed) is read as it always was.
Correctness rests on the conditional writes alone; the lease's clock only
decides when another process may try to take the run (liveness).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec

from actorflow.storage._records import EventRecord

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "COUNT",
    "EPOCH",
    "STALE_WRITE",
    "TAKEOVER",
    "Stamp",
    "TakeOver",
    "stale_write",
    "takeover_epoch",
    "takeover_record",
]

COUNT: Final = "af-count"
"""Segment metadata: how many records it holds."""
EPOCH: Final = "af-epoch"
"""Segment metadata: the epoch it was written under."""
_FENCE: Final = "af-fence"

TAKEOVER: Final = "takeover"
"""``EventRecord.kind`` of a take-over record."""
STALE_WRITE: Final = "stale_write"
"""``EventRecord.kind`` standing in, when read, for a record a fenced owner wrote."""


class TakeOver(msgspec.Struct, frozen=True, kw_only=True):
    """What a take-over record says: who took the run, under which epoch."""

    owner: str
    epoch: int


class _Dropped(msgspec.Struct, frozen=True, kw_only=True):
    epoch: int
    fence: int


def takeover_record(owner: str, epoch: int, now: float) -> EventRecord:
    """The record a new owner writes right after its claim."""
    data = msgspec.msgpack.encode(TakeOver(owner=owner, epoch=epoch))
    return EventRecord(kind=TAKEOVER, data=data, time=now)


def takeover_epoch(record: object) -> int | None:
    """The epoch of a take-over record, or ``None`` for any other record."""
    if not isinstance(record, EventRecord) or record.kind != TAKEOVER or record.data is None:
        return None
    try:
        return msgspec.msgpack.decode(record.data, type=TakeOver).epoch
    except msgspec.DecodeError:
        return None  # not one of ours: an event that merely shares the name


def stale_write(epoch: int, fence: int) -> EventRecord:
    """What a reader returns in place of a record written under ``epoch`` after ``fence``."""
    return EventRecord(
        kind=STALE_WRITE, data=msgspec.msgpack.encode(_Dropped(epoch=epoch, fence=fence))
    )


def _number(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0


@dataclass(frozen=True, slots=True)
class Stamp:
    """The epochs in a segment's metadata.

    Attributes:
        epoch: the epoch it was written under (0: no lease, or not recorded).
        fence: the take-over epoch its writer enforced (0 on older segments).
    """

    epoch: int
    fence: int

    @classmethod
    def of(cls, metadata: Mapping[str, str]) -> Stamp:
        """Read a segment's stamp; a missing or malformed value counts as 0."""
        return cls(_number(metadata.get(EPOCH)), _number(metadata.get(_FENCE)))

    @classmethod
    def under(cls, epoch: int) -> Stamp:
        """The stamp of a segment written under ``epoch``, enforcing it."""
        return cls(epoch, epoch)

    def metadata(self, count: int) -> dict[str, str]:
        """The segment metadata for ``count`` records under this stamp."""
        return {COUNT: str(count), EPOCH: str(self.epoch), _FENCE: str(self.fence)}

    def fences(self, epoch: int) -> bool:
        """Whether an owner of ``epoch`` that meets this segment was taken over."""
        return max(self.epoch, self.fence) > epoch
