"""Framing of log records in segment files, and torn-tail detection.

A frame is a 12-byte header, then the payload (a sealed record)::

    payload length u32 | crc32 of payload u32 | crc32 of the first 8 header bytes u32

The header's own checksum means a damaged length is recognised as damage, never
trusted to skip over good records. Scanning classifies the end of a segment:
zero bytes to the end are space the writer set aside (segments are grown
ahead of their records, so an append changes no file size); an incomplete
frame, or a bad frame with nothing valid after it, is a torn tail (a write
the crash interrupted) that may be cut; a bad frame followed by a valid one is
corruption in the middle, which is an error. No frame is all zeros: its
header checksum never is.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

from actorflow.errors import LogCorruptedError

__all__ = ["HEADER_SIZE", "Scan", "frame", "scan"]

_HEADER = struct.Struct(">III")
HEADER_SIZE: Final = _HEADER.size
MAX_FRAME: Final = 1 << 30


def frame(payload: bytes) -> bytes:
    """One frame around ``payload``."""
    head = struct.pack(">II", len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


@dataclass
class Scan:
    """The good frames of a segment and where its valid part ends.

    Attributes:
        payloads: the payloads of every good frame, in order.
        offsets: the byte offset of each good frame.
        end: the byte offset just after the last good frame.
        torn: bytes after ``end`` that are a torn tail (0 if the segment is clean).
        spare: zero bytes after ``end``, set aside for later records (not damage).
    """

    payloads: list[memoryview] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    end: int = 0
    torn: int = 0
    spare: int = 0


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


def _valid_frame_follows(data: memoryview, at: int) -> bool:
    """Whether a good frame starts anywhere after ``at`` (only a corrupt middle has one)."""
    # a frame starts before the zeros set aside at the end: never search those
    content = len(bytes(data[at:]).rstrip(b"\0")) + at
    for start in range(at + 1, min(len(data) - HEADER_SIZE, content - 1) + 1):
        if isinstance(_frame_at(data, start), int):
            return True
    return False


def scan(data: bytes, *, location: str, last: bool) -> Scan:
    """Split a segment into frames.

    Args:
        data: the segment's bytes.
        location: the segment's name, for errors.
        last: whether this is the newest segment (only it may have a torn tail).

    Raises:
        LogCorruptedError: a bad frame in the middle, or any bad frame in an
            older segment, naming the file and byte offset.
    """
    view = memoryview(data)
    result = Scan()
    at = 0
    while at < len(view):
        end = _frame_at(view, at)
        if isinstance(end, str):
            if data.count(0, at) == len(data) - at:
                result.spare = len(data) - at
                break
            if not last or _damaged_middle(view, at, end):
                raise LogCorruptedError(f"{location} at byte {at}", end)
            result.torn = len(view) - at
            break
        result.offsets.append(at)
        result.payloads.append(view[at + HEADER_SIZE : end])
        at = end
    result.end = at
    return result


def _damaged_middle(view: memoryview, at: int, why: str) -> bool:
    if why.startswith("incomplete"):
        return False
    if why == "payload checksum mismatch":
        length = _HEADER.unpack_from(view, at)[0]
        nxt = at + HEADER_SIZE + length
        return nxt < len(view) and isinstance(_frame_at(view, nxt), int)
    # A bad header hides where the next frame starts: look for any good frame after it.
    return _valid_frame_follows(view, at)
