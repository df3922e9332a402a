"""Framing of log records in segment files, and torn-tail detection.

A frame is a 12-byte header, then the payload (a sealed record)::

    payload length u32 | crc32 of payload u32 | crc32 of the first 8 header bytes u32

The header's own checksum means a damaged length is recognised as damage, never
trusted to skip over good records. Scanning classifies the end of a segment:
zero bytes to the end are space the writer set aside (segments are grown
ahead of their records, so an append changes no file size); an incomplete
frame, or damaged frames with nothing valid after them, are a torn tail (a
write the crash interrupted) that may be cut. No frame is all zeros: its
header checksum never is.

A damaged frame in the middle still counts as one position when its end is
known for sure: its header checks (only the payload is damaged), or its
payload is a sound sealed record whose own header gives its length (only the
frame header is damaged). Scanning reports such a frame instead of failing,
so a reader can skip a damaged record it does not need (one a checkpoint
already covers) and the writer can find the log's end. Where the damage hides
the frame's end, no position after it can be counted: that is an error.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from actorflow.errors import LogCorruptedError

__all__ = ["HEADER_SIZE", "Measure", "Scan", "frame", "scan"]

_HEADER = struct.Struct(">III")
HEADER_SIZE: Final = _HEADER.size
MAX_FRAME: Final = 1 << 30


def frame(payload: bytes) -> bytes:
    """One frame around ``payload``."""
    head = struct.pack(">II", len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


Measure: TypeAlias = Callable[[memoryview], int | None]
"""The length of the sound sealed record a view starts with, else ``None`` (``Codec.measure``)."""


@dataclass
class Scan:
    """The frames of a segment and where its valid part ends.

    Attributes:
        payloads: each frame's payload in order, ``None`` for a damaged one
            whose end is known (see ``damaged``); one entry per log position.
        offsets: the byte offset of each frame.
        damaged: why each damaged frame is damaged, by its index in ``payloads``.
        end: the byte offset just after the last frame.
        torn: bytes after ``end`` that are a torn tail (0 if the segment is clean).
        spare: zero bytes after ``end``, set aside for later records (not damage).
    """

    payloads: list[memoryview | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    damaged: dict[int, str] = field(default_factory=dict)
    end: int = 0
    torn: int = 0
    spare: int = 0

    def where(self, location: str, index: int) -> str:
        """``location`` and the byte offset of frame ``index``, for errors."""
        return f"{location} at byte {self.offsets[index]}"


def _frame_at(data: memoryview, at: int) -> int | str:
    """The end offset of a good frame at ``at``, or why there is none."""
    if len(data) - at < HEADER_SIZE:
        return "incomplete header"
    length, crc, head_crc = _HEADER.unpack_from(data, at)
    if zlib.crc32(data[at : at + 8]) != head_crc or length > MAX_FRAME:
        return "bad frame header"
    end: int = at + HEADER_SIZE + length
    if end > len(data):
        return "incomplete payload"
    if zlib.crc32(data[at + HEADER_SIZE : end]) != crc:
        return "payload checksum mismatch"
    return end


def _known_end(data: memoryview, at: int, why: str, measure: Measure | None) -> int | None:
    """Where the damaged frame at ``at`` ends, if that is certain; else ``None``."""
    if why == "payload checksum mismatch":  # the header checked: its length holds
        return at + HEADER_SIZE + int(_HEADER.unpack_from(data, at)[0])
    if why == "bad frame header" and measure is not None:
        # the payload may still be whole: a sealed record verified by its own
        # checksum says how long it is, whatever the damaged header claims
        size = measure(data[at + HEADER_SIZE :])
        if size is not None:
            return at + HEADER_SIZE + size
    return None


def _valid_frame_follows(data: memoryview, at: int) -> bool:
    """Whether a good frame starts anywhere after ``at`` (only a corrupt middle has one)."""
    # a frame starts before the zeros set aside at the end: never search those
    content = len(bytes(data[at:]).rstrip(b"\0")) + at
    for start in range(at + 1, min(len(data) - HEADER_SIZE, content - 1) + 1):
        if isinstance(_frame_at(data, start), int):
            return True
    return False


def scan(data: bytes, *, location: str, last: bool, measure: Measure | None = None) -> Scan:
    """Split a segment into frames.

    Args:
        data: the segment's bytes.
        location: the segment's name, for errors.
        last: whether this is the newest segment (only it may have a torn tail).
        measure: finds the length of a sealed record whose frame header is
            damaged; without it such a frame's end is unknown.

    Raises:
        LogCorruptedError: a damaged frame whose end is unknown in the middle,
            or in an older segment, naming the file and byte offset.
    """
    view = memoryview(data)
    result = Scan()
    at = 0
    while at < len(view):
        end = _frame_at(view, at)
        if isinstance(end, int):
            result.offsets.append(at)
            result.payloads.append(view[at + HEADER_SIZE : end])
            at = end
            continue
        if data.count(0, at) == len(data) - at:
            result.spare = len(data) - at
            break
        known = _known_end(view, at, end, measure)
        if known is not None:
            result.damaged[len(result.payloads)] = end
            result.offsets.append(at)
            result.payloads.append(None)
            at = known
            continue
        if not last or _valid_frame_follows(view, at):
            raise LogCorruptedError(
                f"{location} at byte {at}",
                f"{end}, so where the records after it begin is unknown",
            )
        result.torn = len(view) - at
        break
    result.end = at
    if last:
        _cut_damaged_tail(result, len(view))
    return result


def _cut_damaged_tail(result: Scan, size: int) -> None:
    """Damaged frames with nothing good after them are a torn tail: a write cut short."""
    while result.payloads and result.payloads[-1] is None:
        result.payloads.pop()
        result.damaged.pop(len(result.payloads))
        result.end = result.offsets.pop()
        result.torn, result.spare = size - result.end, 0
