"""The decision log on S3: one immutable segment object per append.

``log/{start:020d}`` holds the records from position ``start``, each sealed by
the codec for its position and framed as ``u32 length + sealed record``; its
metadata gives the count. A segment is created with ``If-None-Match: *``, so
two writers of one position cannot both win and nothing is ever overwritten.
``log-start`` holds the first position kept after pruning. S3 writes are
atomic: a segment is whole or absent, so there is no torn tail to cut.
Segments carry epochs, a new owner's first segment is a take-over record, and
a stale owner is fenced by them (``_fencing.py``).
"""

from __future__ import annotations

import struct
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from actorflow._log import get_logger
from actorflow.errors import (
    CorruptedDataError,
    LeaseLostError,
    LogCorruptedError,
    LogPrunedError,
    NewerFormatError,
    StorageError,
)
from actorflow.storage._codec import encode_record
from actorflow.storage._envelope import Kind
from actorflow.storage.s3._fencing import (
    COUNT,
    Stamp,
    stale_write,
    takeover_epoch,
    takeover_record,
)
from actorflow.storage.s3._wire import PreconditionFailed, drop_idle_lock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from actorflow.storage._records import LogRecord
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects
    from actorflow.storage.s3._wire import ObjectInfo

__all__ = ["SegmentLog", "split_frames"]

_log = get_logger(__name__)
_FRAME = struct.Struct(">I")
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
        # the newest fence a writer without a lease has seen, which its segments carry
        self._seen: dict[str, int] = {}
        self._locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)
        self._pending: defaultdict[str, list[_Batch]] = defaultdict(list)

    def forget(self, run_id: str) -> None:
        """Drop what is cached about the run's log (deleted, or let go of)."""
        self._next.pop(run_id, None)
        self._seen.pop(run_id, None)
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
            if name.isascii() and name.isdigit():  # "²" is a digit int() refuses
                found.append((int(name), o.key))
        return found

    async def _log_start(self, run_id: str) -> int:
        key = self._objects.key(run_id, "log-start")
        data = await self._objects.get_or_none("read log", key)
        if not data:
            return 0
        if not (data.isascii() and data.isdigit()):
            raise LogCorruptedError(self._objects.location(key), "holds no log position")
        return int(data)

    async def _end(
        self,
        run_id: str,
        segments: list[tuple[int, str]],
        meet: Callable[[ObjectInfo], None] | None = None,
    ) -> int:
        """The log's length: the newest segment's end, or where pruning left it.

        ``meet`` sees the newest segment's description first (and may raise).
        """
        floor = await self._log_start(run_id)
        while segments:
            start, key = segments[-1]
            info = await self._objects.head("read log", key)
            if info is not None:
                if meet is not None:
                    meet(info)
                count = info.metadata.get(COUNT, "0")
                if not (count.isascii() and count.isdigit()):
                    where = self._objects.location(key)
                    raise LogCorruptedError(where, f"its record count {count[:20]!r} is no number")
                return max(floor, start + int(count))
            segments = await self._segments(run_id)  # pruned meanwhile: look again
        return floor

    async def length(self, run_id: str) -> int:
        """Position just after the last record."""
        return await self._end(run_id, await self._segments(run_id))

    async def append(self, run_id: str, records: Sequence[LogRecord], *, epoch: int | None) -> int:
        """Write ``records`` at the log's end; return the new length.

        ``epoch`` is the writer's lease epoch (``None``: it holds no lease and
        is never fenced). Appends waiting for the run's lock are written
        together, as one segment object (group commit: one PUT serves every
        waiter). A record that cannot be encoded fails only its own append,
        before it joins a group. A cancelled append drops the cached length,
        so the next one looks again and finds a late landing.

        Raises:
            LeaseLostError: a newer owner's segment holds the position, or ends the log.
        """
        batch = _Batch([encode_record(r) for r in records])
        pending = self._pending[run_id]
        pending.append(batch)
        try:
            async with self._locks[run_id]:
                if batch.end is None:
                    group, pending[:] = list(pending), []
                    await self._write_group(run_id, group, epoch)
        finally:
            if batch in pending:  # cancelled before any group took it: it never leaves
                pending.remove(batch)
        if batch.error is not None:
            raise batch.error
        assert batch.end is not None
        return batch.end

    async def take_over(self, run_id: str, owner: str, epoch: int) -> int:
        """Write the take-over record of ``owner``'s new ``epoch`` at the log's end.

        Called right after a claim: from its position on, a lower epoch's
        segment is fenced. Returns the record's position.

        Raises:
            LeaseLostError: an even newer owner has written to the log already.
        """
        raw = [encode_record(takeover_record(owner, epoch, time.time()))]
        async with self._locks[run_id]:
            self._next.pop(run_id, None)  # whatever this store cached predates the claim
            end = await self._write(run_id, raw, epoch)
        _log.info("s3_run_taken_over", run_id=run_id, owner=owner, epoch=epoch, position=end - 1)
        return end - 1

    async def _write_group(self, run_id: str, group: list[_Batch], epoch: int | None) -> None:
        raw = [r for b in group for r in b.records]
        try:
            # Other appenders' records ride on this write: see it through even if
            # this task is cancelled, so each of them learns the outcome.
            with anyio.CancelScope(shield=len(group) > 1):
                end = await self._write(run_id, raw, epoch)
        except Exception as exc:
            for b in group:
                b.error = exc
            return
        position = end - len(raw)
        for b in group:
            position += len(b.records)
            b.end = position

    async def _write(self, run_id: str, raw: list[bytes], epoch: int | None) -> int:
        start = self._next.pop(run_id, None)
        if start is None:
            start = await self._writable_end(run_id, epoch)
        token = uuid.uuid4().hex
        for _ in range(_ATTEMPTS):
            key = self._segment(run_id, start)
            body = self._frame(run_id, start, raw)
            meta = self._stamp(run_id, epoch).metadata(len(raw))
            try:
                await self._objects.put("append", key, body, token=token, metadata=meta)
            except PreconditionFailed as exc:
                _log.info("s3_log_position_taken", run_id=run_id, position=start)
                self._meet(run_id, epoch, exc.found)
                start = await self._writable_end(run_id, epoch)
                continue
            self._next[run_id] = start + len(raw)
            return start + len(raw)
        raise StorageError("append", f"run {run_id!r}: the log kept moving; try again")

    def _stamp(self, run_id: str, epoch: int | None) -> Stamp:
        if epoch is None:  # not an owner: take the newest fence seen, so readers keep it
            return Stamp.under(self._seen.get(run_id, 0))
        return Stamp.under(epoch)

    def _meet(self, run_id: str, epoch: int | None, found: ObjectInfo | None) -> None:
        """Take in a segment met where this writer meant to write, or at the log's end.

        Raises:
            LeaseLostError: it was written under a newer epoch than the writer's lease.
        """
        if found is None:
            return  # gone again (pruned): the log's end is read next anyway
        stamp = Stamp.of(found.metadata)
        if epoch is None:
            self._seen[run_id] = max(self._seen.get(run_id, 0), stamp.fence)
        elif stamp.fences(epoch):
            _log.warning(
                "s3_owner_fenced", run_id=run_id, epoch=epoch, newer=max(stamp.epoch, stamp.fence)
            )
            raise LeaseLostError(run_id, epoch)

    async def _writable_end(self, run_id: str, epoch: int | None) -> int:
        """The log's end, for a writer under ``epoch``: fenced if a newer owner wrote last.

        Raises:
            LeaseLostError: the last segment was written under a newer epoch.
        """
        segments = await self._segments(run_id)
        return await self._end(run_id, segments, partial(self._meet, run_id, epoch))

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
        except (LogCorruptedError, NewerFormatError):
            raise
        except CorruptedDataError as exc:
            raise LogCorruptedError(where, exc.cause_text) from exc

    async def read(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """Records from absolute position ``start`` to the end.

        A record of a segment written under a lower epoch than a take-over
        before it (a stale owner's) comes back as a ``stale_write`` event, so
        every other record keeps its position.

        Raises:
            LogPrunedError: records below ``start`` were pruned.
            LogCorruptedError: a segment is damaged (named, with the position).
        """
        floor = await self._log_start(run_id)
        if start < floor:
            raise LogPrunedError(run_id, floor, start)
        segments = await self._segments(run_id)
        # the first segment wanted is the one before the first that starts after `start`
        later = [i for i in range(1, len(segments)) if segments[i][0] > start]
        first = later[0] - 1 if later else max(len(segments) - 1, 0)
        wanted = segments[first:]
        calls: list[Callable[[], Awaitable[Any]]] = [
            partial(self._objects.fetch, "read log", k) for _, k in wanted
        ]
        if first:  # the segment before says which take-over is in force where we start
            calls.append(partial(self._objects.head, "read log", segments[first - 1][1]))
        fetched = await self._objects.gather(calls)
        before: ObjectInfo | None = fetched.pop() if first else None
        fence = Stamp.of(before.metadata).fence if before is not None else 0
        records: list[LogRecord] = []
        for (seg_start, key), got in zip(wanted, fetched, strict=True):
            if got is not None:  # else pruned while we read
                fence = self._add_segment(run_id, seg_start, key, got, fence, records, start)
        return records

    def _add_segment(
        self,
        run_id: str,
        seg_start: int,
        key: str,
        got: tuple[bytes, ObjectInfo],
        fence: int,
        records: list[LogRecord],
        start: int,
    ) -> int:
        """Add one segment's records from ``start + len(records)`` on; return the fence after it.

        ``fence`` is the newest take-over epoch before the segment: a segment
        written under a lower epoch is a stale owner's, read as ``stale_write``.
        """
        body, info = got
        stamp = Stamp.of(info.metadata)
        stale = stamp.epoch < fence
        location = self._objects.location(key)
        for i, sealed in enumerate(self._frames(body, location)):
            position = seg_start + i
            # A segment rewritten by pruning overlaps its original: skip what we have.
            if position != start + len(records):
                continue
            if stale:
                records.append(stale_write(stamp.epoch, fence))
                continue
            record = self._load(run_id, position, sealed, location)
            fence = max(fence, takeover_epoch(record) or 0)
            records.append(record)
        if stale:
            _log.warning(
                "s3_stale_segment_dropped",
                run_id=run_id,
                location=location,
                epoch=stamp.epoch,
                fence=fence,
            )
            return fence
        return max(fence, stamp.fence)

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
        got = await self._objects.fetch("truncate log", key)
        if got is None:
            return
        data, info = got
        frames = self._frames(data, self._objects.location(key))[position - start :]
        body = b"".join(_FRAME.pack(len(f)) + f for f in frames)
        meta = Stamp.of(info.metadata).metadata(len(frames))  # the copy keeps its epochs
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
