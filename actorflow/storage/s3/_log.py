"""The decision log on S3: one immutable segment object per append.

``log/{start:020d}`` holds the records from position ``start``, each sealed by
the codec for its position and framed as ``u32 length + sealed record``; its
metadata gives the count. A segment is created with ``If-None-Match: *``, so
two writers of one position cannot both win and nothing is ever overwritten.
``log-start`` holds the first position kept after pruning. S3 writes are
atomic: a segment is whole or absent, so there is no torn tail to cut.
"""

from __future__ import annotations

import struct
import uuid
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio

from actorflow._log import get_logger
from actorflow.errors import CorruptedDataError, LogCorruptedError, StorageError
from actorflow.storage._codec import encode_record
from actorflow.storage._envelope import Kind
from actorflow.storage.s3._wire import PreconditionFailed, drop_idle_lock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from actorflow.storage._records import LogRecord
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["SegmentLog", "split_frames"]

_log = get_logger(__name__)
_FRAME = struct.Struct(">I")
_COUNT = "af-count"
_EPOCH = "af-epoch"
_ATTEMPTS = 1000


def split_frames(data: bytes, location: str) -> list[bytes]:
    """The sealed records of one segment object, in order.

    Raises:
        LogCorruptedError: a frame runs past the end of the segment.
    """
    frames: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + _FRAME.size > len(data):
            raise LogCorruptedError(location, f"truncated frame header at offset {offset}")
        (size,) = _FRAME.unpack_from(data, offset)
        offset += _FRAME.size
        if offset + size > len(data):
            raise LogCorruptedError(location, f"truncated record at offset {offset}")
        frames.append(data[offset : offset + size])
        offset += size
    return frames


@dataclass(eq=False)
class _Batch:
    """One append's encoded records, waiting for a group write."""

    records: list[bytes]
    end: int | None = None
    error: Exception | None = None


class SegmentLog:
    """Append, read, measure and prune run logs kept as segment objects."""

    def __init__(self, objects: S3Objects, codec: Codec) -> None:
        self._objects = objects
        self._codec = codec
        self._next: dict[str, int] = {}
        self._locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)
        self._pending: defaultdict[str, list[_Batch]] = defaultdict(list)

    def forget(self, run_id: str) -> None:
        """Drop what is cached about the run's log (deleted, or let go of)."""
        self._next.pop(run_id, None)
        drop_idle_lock(self._locks, run_id)
        if not self._pending.get(run_id, True):
            del self._pending[run_id]

    def _segment(self, run_id: str, start: int) -> str:
        return self._objects.key(run_id, "log", f"{start:020d}")

    async def _segments(self, run_id: str) -> list[tuple[int, str]]:
        prefix = self._objects.key(run_id, "log", "")
        found = []
        for o in await self._objects.list_objects("read log", prefix):
            name = o.key[len(prefix) :]
            if name.isdigit():
                found.append((int(name), o.key))
        return found

    async def _log_start(self, run_id: str) -> int:
        data = await self._objects.get_or_none("read log", self._objects.key(run_id, "log-start"))
        return int(data) if data else 0

    async def _end(self, run_id: str, segments: list[tuple[int, str]]) -> int:
        """The log's length: the newest segment's end, or where pruning left it."""
        floor = await self._log_start(run_id)
        while segments:
            start, key = segments[-1]
            info = await self._objects.head("read log", key)
            if info is not None:
                return max(floor, start + int(info.metadata.get(_COUNT, "0")))
            segments = await self._segments(run_id)  # pruned meanwhile: look again
        return floor

    async def length(self, run_id: str) -> int:
        """Position just after the last record."""
        return await self._end(run_id, await self._segments(run_id))

    async def append(
        self,
        run_id: str,
        records: Sequence[LogRecord],
        *,
        epoch: int,
        on_taken: Callable[[], Awaitable[None]],
    ) -> int:
        """Write ``records`` at the log's end; return the new length.

        Appends waiting for the run's lock are written together, as one
        segment object (group commit: one PUT serves every waiter). A record
        that cannot be encoded fails only its own append, before it joins a
        group. ``on_taken`` runs when another writer took the position (it
        raises ``LeaseLostError`` if that writer fenced us). A cancelled append
        drops the cached length, so the next one looks again and finds a late
        landing.
        """
        batch = _Batch([encode_record(r) for r in records])
        pending = self._pending[run_id]
        pending.append(batch)
        try:
            async with self._locks[run_id]:
                if batch.end is None:
                    group, pending[:] = list(pending), []
                    await self._write_group(run_id, group, epoch, on_taken)
        finally:
            if batch in pending:  # cancelled before any group took it: it never leaves
                pending.remove(batch)
        if batch.error is not None:
            raise batch.error
        assert batch.end is not None
        return batch.end

    async def _write_group(
        self,
        run_id: str,
        group: list[_Batch],
        epoch: int,
        on_taken: Callable[[], Awaitable[None]],
    ) -> None:
        raw = [r for b in group for r in b.records]
        try:
            # Other appenders' records ride on this write: see it through even if
            # this task is cancelled, so each of them learns the outcome.
            with anyio.CancelScope(shield=len(group) > 1):
                end = await self._write(run_id, raw, epoch, on_taken)
        except Exception as exc:
            for b in group:
                b.error = exc
            return
        position = end - len(raw)
        for b in group:
            position += len(b.records)
            b.end = position

    async def _write(
        self, run_id: str, raw: list[bytes], epoch: int, on_taken: Callable[[], Awaitable[None]]
    ) -> int:
        start = self._next.pop(run_id, None)
        if start is None:
            start = await self.length(run_id)
        token = uuid.uuid4().hex
        meta = {_COUNT: str(len(raw)), _EPOCH: str(epoch)}
        for _ in range(_ATTEMPTS):
            key = self._segment(run_id, start)
            body = self._frame(run_id, start, raw)
            try:
                await self._objects.put("append", key, body, token=token, metadata=meta)
            except PreconditionFailed:
                _log.info("s3_log_position_taken", run_id=run_id, position=start)
                await on_taken()
                start = await self.length(run_id)
                continue
            self._next[run_id] = start + len(raw)
            return start + len(raw)
        raise StorageError("append", f"run {run_id!r}: the log kept moving; try again")

    def _frame(self, run_id: str, start: int, raw: Sequence[bytes]) -> bytes:
        parts: list[bytes] = []
        for i, payload in enumerate(raw):
            sealed = self._codec.seal(
                payload, kind=Kind.LOG_RECORD, run_id=run_id, slot=f"log/{start + i}"
            )
            parts += (_FRAME.pack(len(sealed)), sealed)
        return b"".join(parts)

    @staticmethod
    def _frames(data: bytes, location: str) -> list[bytes]:
        return split_frames(data, location)

    def _load(self, run_id: str, position: int, sealed: bytes, location: str) -> LogRecord:
        where = f"{location} (position {position})"
        try:
            return self._codec.load_record(sealed, run_id=run_id, position=position, location=where)
        except LogCorruptedError:
            raise
        except CorruptedDataError as exc:
            raise LogCorruptedError(where, exc.cause_text) from exc

    async def read(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """Records from absolute position ``start`` to the end.

        Raises:
            StorageError: records below ``start`` were pruned.
            LogCorruptedError: a segment is damaged (named, with the position).
        """
        floor = await self._log_start(run_id)
        if start < floor:
            raise StorageError(
                "read log",
                f"records of run {run_id!r} below position {floor} were pruned; read from "
                f"a checkpoint's position ({start} asked)",
            )
        segments = await self._segments(run_id)
        wanted = [
            seg
            for i, seg in enumerate(segments)
            if i + 1 == len(segments) or segments[i + 1][0] > start
        ]
        bodies = await self._objects.gather(
            [partial(self._objects.get_or_none, "read log", k) for _, k in wanted]
        )
        records: list[LogRecord] = []
        position = start
        for (seg_start, key), body in zip(wanted, bodies, strict=True):
            if body is None:
                continue  # pruned while we read
            location = self._objects.location(key)
            for i, sealed in enumerate(self._frames(body, location)):
                # A segment rewritten by pruning overlaps its original: skip what we have.
                if seg_start + i == position:
                    records.append(self._load(run_id, position, sealed, location))
                    position += 1
        return records

    async def truncate_before(self, run_id: str, position: int) -> int:
        """Drop records below ``position``; return how many went.

        Whole segments below go; a segment across ``position`` is copied from
        ``position`` on (the sealed records move unchanged) and then removed.
        """
        segments = await self._segments(run_id)
        floor = await self._log_start(run_id)
        end = await self._end(run_id, list(segments))
        position = min(position, end)
        if position <= floor:
            return 0
        await self._objects.wire.call(
            "truncate log",
            "put_object",
            Key=self._objects.key(run_id, "log-start"),
            Body=str(position).encode(),
        )
        doomed: list[str] = []
        for i, (start, key) in enumerate(segments):
            seg_end = segments[i + 1][0] if i + 1 < len(segments) else end
            if seg_end <= position:
                doomed.append(key)
            elif start < position:
                await self._copy_tail(run_id, key, start, position)
                doomed.append(key)
        await self._objects.delete("truncate log", doomed)
        return position - floor

    async def _copy_tail(self, run_id: str, key: str, start: int, position: int) -> None:
        data = await self._objects.get_or_none("truncate log", key)
        if data is None:
            return
        frames = self._frames(data, self._objects.location(key))[position - start :]
        body = b"".join(_FRAME.pack(len(f)) + f for f in frames)
        meta = {_COUNT: str(len(frames)), _EPOCH: "0"}
        try:
            await self._objects.put(
                "truncate log",
                self._segment(run_id, position),
                body,
                token=uuid.uuid4().hex,
                metadata=meta,
            )
        except PreconditionFailed:
            pass  # an earlier prune already made this tail segment
