"""One run's log in a FileStore: segment files of framed records, group commit.

Appenders encode and seal their records on their own path, queue them, and
one of them (the flusher) carries everything queued to disk in one write and
one fsync in a worker thread while the others wait; when it is done the next
waiter with work left becomes the flusher. Only the writer cuts a torn tail,
before its first append; readers skip it.

A segment is grown ahead of its records with zeros (16 KiB, then doubling, up
to 1 MiB at a time), so most appends write inside the file's size and make
themselves durable with ``fdatasync``: no file-size change, so no metadata
for the file system's journal to commit. That costs about a third less per
append here, and the appends no longer queue behind the journal commits of
checkpoint writes (benchmarks/storage.py, "Log append of 800 bytes").
The growing append itself takes a full ``fsync``. Closing the segment cuts
the zeros off again; after a crash readers see them as space, not damage.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import sniffio

from actorflow._log import get_logger
from actorflow.errors import (
    CorruptedDataError,
    LogCorruptedError,
    LogPrunedError,
    NewerFormatError,
    StorageError,
)
from actorflow.storage._codec import encode_record
from actorflow.storage._sealing import Codec, Kind
from actorflow.storage.file._frames import HEADER_SIZE, Scan, frame, scan
from actorflow.storage.file._fs import remake_folder
from actorflow.storage.file._threads import run_in_thread

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage._records import LogRecord
    from actorflow.storage.file._fs import FileSystem

__all__ = ["FileLog", "is_segment", "segment_name"]

_log = get_logger(__name__)
_SUFFIX = ".seg"
_SEGMENT = re.compile(r"[0-9]{20}\.seg")
_GROW_MIN = 16 * 1024
_GROW_MAX = 1024 * 1024


@dataclass
class _Ticket:
    end: int
    data: bytes
    done: bool = False
    error: BaseException | None = None


def _on_asyncio() -> bool:
    return sniffio.current_async_library() == "asyncio"


def is_segment(name: str) -> bool:
    """Whether ``name`` is one :func:`segment_name` makes (other files are not the log)."""
    return _SEGMENT.fullmatch(name) is not None


def segment_name(start: int) -> str:
    """A segment's file name: its first record's position, zero-padded."""
    return f"{start:020d}{_SUFFIX}"


class FileLog:
    """The log of one run under ``folder``; blocking methods run in worker threads."""

    def __init__(
        self, fs: FileSystem, codec: Codec, run_id: str, folder: str, segment_bytes: int
    ) -> None:
        self.fs = fs
        self.codec = codec
        self.run_id = run_id
        self.folder = folder
        self.segment_bytes = segment_bytes
        self.broken = False
        self.durable = 0
        self._reserved = 0
        self._handle: int | None = None
        self._segment_size = 0
        self._allocated = 0  # the segment file's size: content, then zeros set aside
        self._queue: list[_Ticket] = []
        # a torn tail found by the scan that opened the log, cut before the first append
        self._torn: tuple[str, int] | None = None
        # opened by a read and not appended to since: closing leaves the file as it is
        self._as_read = False
        self._flushing = False
        self._idle = anyio.Event()

    # --- reading (any thread, any process) ------------------------------------------

    def _segments(self) -> list[int]:
        names = self.fs.listdir(self.folder)
        # only names segment_name makes: another ``.seg`` there is not a segment
        return sorted(int(n[: -len(_SUFFIX)]) for n in names if is_segment(n))

    def _path(self, start: int) -> str:
        return os.path.join(self.folder, segment_name(start))

    def read(self, start: int, *, open_for_append: bool = False) -> list[LogRecord]:
        """Records from absolute position ``start``; a torn tail is left out.

        Only what is at or after ``start`` is checked and decoded: a damaged
        record before it (one a checkpoint covers) is stepped over, as long as
        where it ends is certain. With ``open_for_append`` the log is then
        opened for appends from the same scan of its last segment (a recovery
        reads the log, then appends: one trip, one scan); a torn tail is left
        as it is until the first append, which cuts it, as
        :meth:`open_for_append` would have.

        Raises:
            LogCorruptedError: a bad record at or after ``start`` before the
                tail, or damage before it that hides where the records after
                it begin; naming file and offset.
            LogPrunedError: ``start`` is below what retention kept.
        """
        try:
            return self._read(start, open_for_append)
        except BaseException:
            if open_for_append:
                self.let_go()
            raise

    def _read(self, start: int, open_for_append: bool) -> list[LogRecord]:
        segments = self._segments()
        if segments and start < segments[0]:
            raise LogPrunedError(self.run_id, segments[0], start)
        records: list[LogRecord] = []
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            if not last and segments[i + 1] <= start:
                continue
            path = self._path(seg)
            content = self.fs.read(path)
            found = self._scan(path, last=last, content=content)
            if last and open_for_append:
                self._open_at(seg, path, content, found)
                self._as_read = True
            if not last and seg + len(found.payloads) != segments[i + 1]:
                raise LogCorruptedError(
                    path, "segment holds fewer records than the next one expects"
                )
            for n, payload in enumerate(found.payloads):
                if seg + n < start:
                    continue
                if payload is None:
                    raise LogCorruptedError(found.where(path, n), found.damaged[n])
                records.append(self._load(payload, seg + n, path, found.offsets[n]))
        return records

    def _scan(self, path: str, *, last: bool, content: bytes | None = None) -> Scan:
        data = self.fs.read(path) if content is None else content
        return scan(data, location=path, last=last, measure=self.codec.measure)

    def _load(self, payload: memoryview, position: int, path: str, offset: int) -> LogRecord:
        record = self.codec.load_plain_record(payload)
        if record is not None:
            return record
        location = f"{path} at byte {offset}"
        try:
            return self.codec.load_record(
                bytes(payload), run_id=self.run_id, position=position, location=location
            )
        except (LogCorruptedError, NewerFormatError):
            raise
        except CorruptedDataError as exc:
            raise LogCorruptedError(location, exc.cause_text) from exc

    def length(self) -> int:
        """Position just after the last record (a damaged one whose end is certain counts)."""
        segments = self._segments()
        if not segments:
            return 0
        return segments[-1] + len(self._scan(self._path(segments[-1]), last=True).payloads)

    def drop_segments_before(self, position: int) -> int:
        """Delete whole segments that end at or below ``position``; return records dropped.

        One folder fsync makes the cut durable: a segment a power loss brought
        back below the others would look like a log with records missing.
        """
        segments = self._segments()
        dropped = 0
        for seg, nxt in itertools.pairwise(segments):
            if nxt > position:
                break
            self.fs.unlink(self._path(seg))
            dropped += nxt - seg
        if dropped:
            self.fs.fsync_dir(self.folder)
        return dropped

    # --- writing (this process's owner of the run) ------------------------------------

    def open_for_append(self) -> None:
        """Find the end of the log, cutting a torn tail first (with a warning).

        A damaged record in the middle whose end is certain holds its position
        (readers that need it report it); damage that hides where the records
        after it begin raises ``LogCorruptedError``: the log's end is unknown.
        """
        segments = self._segments()
        if not segments:
            return
        start = segments[-1]
        path = self._path(start)
        content = self.fs.read(path)
        self._open_at(start, path, content, self._scan(path, last=True, content=content))
        self._cut_torn_tail()

    def _open_at(self, start: int, path: str, content: bytes, found: Scan) -> None:
        """Open the last segment (``content``, scanned into ``found``) for appends."""
        self._handle = self.fs.open(path, "write")
        self._allocated = len(content)
        self._segment_size = found.end
        self._torn = (path, found.torn) if found.torn else None
        self.durable = self._reserved = start + len(found.payloads)

    def _cut_torn_tail(self) -> None:
        """Cut the torn tail the opening scan found, if any (with a warning)."""
        if self._torn is None:
            return
        assert self._handle is not None
        path, torn = self._torn
        _log.warning(
            "log_tail_cut", run_id=self.run_id, file=path, offset=self._segment_size, bytes=torn
        )
        self.fs.truncate(self._handle, self._segment_size)
        self.fs.fsync(self._handle)
        self._allocated = self._segment_size
        self._torn = None

    async def append(self, records: Sequence[LogRecord]) -> int:
        """Append durably; concurrent callers share one write and one fsync."""
        if self.broken:
            raise StorageError("append log", "an earlier write failed; retry to reopen the log")
        raws = [encode_record(r) for r in records]  # fails before any position is taken
        if not raws:
            return self._reserved
        start = self._reserved
        data = b"".join(
            frame(
                self.codec.seal(
                    raw, kind=Kind.LOG_RECORD, run_id=self.run_id, slot=f"log/{start + i}"
                )
            )
            for i, raw in enumerate(raws)
        )
        self._reserved += len(raws)
        ticket = _Ticket(end=self._reserved, data=data)
        self._queue.append(ticket)
        try:
            await self._until_done(ticket)
        except anyio.get_cancelled_exc_class():
            # Queued records hold their positions and will be written, so the
            # caller must learn how that went: finish, then let the
            # cancellation through (trio raises it again at the next checkpoint).
            with anyio.CancelScope(shield=True):
                await self._until_done(ticket)
            if _on_asyncio():
                raise
        if ticket.error is not None:
            raise ticket.error
        return ticket.end

    async def _until_done(self, ticket: _Ticket) -> None:
        while not ticket.done:
            if self._flushing:
                await self._idle.wait()
            else:
                await self._flush()

    async def _flush(self) -> None:
        self._flushing = True
        self._idle = anyio.Event()
        batch, self._queue = self._queue, []
        outcome: list[BaseException | None] = []
        try:
            await run_in_thread(self._write_batch, batch, outcome)
        finally:
            # Runs on cancellation too; by then the thread has finished (or never ran).
            if not outcome:
                self._queue = batch + self._queue
            elif outcome[0] is None:
                self.durable = batch[-1].end
                for ticket in batch:
                    ticket.done = True
            else:
                self._fail(batch + self._queue, outcome[0])
            self._flushing = False
            self._idle.set()

    def _fail(self, tickets: list[_Ticket], cause: BaseException) -> None:
        self.broken = True
        self._queue = []
        self._reserved = self.durable
        error = StorageError("append log", f"{type(cause).__name__}: {cause}; nothing was appended")
        error.__cause__ = cause
        for ticket in tickets:
            ticket.done = True
            ticket.error = error

    def _write_batch(self, batch: list[_Ticket], outcome: list[BaseException | None]) -> None:
        data = b"".join(t.data for t in batch)
        size = self._segment_size
        try:
            self._as_read = False
            self._cut_torn_tail()  # left by a log opened as it was read
            new_segment = self._handle is None or (size and size + len(data) > self.segment_bytes)
            if new_segment:
                self._start_segment(self.durable)  # the batch starts where the log ends
                size = 0
            assert self._handle is not None
            end = size + len(data)
            if end <= self._allocated:
                self.fs.write_at(self._handle, data, size)
                self.fs.sync_data(self._handle)
            else:
                self._allocated = self._grow(data, size)
                self.fs.fsync(self._handle)
            if new_segment:
                self.fs.fsync_dir(self.folder)
            self._segment_size = size + len(data)
            outcome.append(None)
        except BaseException as exc:  # handed to the waiters, never lost in the thread
            self._undo(size)
            outcome.append(exc)

    def _grow(self, data: bytes, size: int) -> int:
        """Write ``data`` at ``size`` followed by zeros set aside; return the new file size.

        On a disk too full for the zeros the records go alone: space set
        aside must never be why an append fails.
        """
        assert self._handle is not None
        end = size + len(data)
        grown = end + min(max(end, _GROW_MIN), _GROW_MAX)
        grown = min(grown, max(end, self.segment_bytes))
        try:
            self.fs.write_at(self._handle, data + bytes(grown - end), size)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            self.fs.truncate(self._handle, size)  # whatever part of it landed
            self.fs.write_at(self._handle, data, size)
            return end
        return grown

    def _start_segment(self, start: int) -> None:
        self.close()
        try:
            self._handle = self.fs.open(self._path(start), "write")
        except FileNotFoundError:
            remake_folder(self.fs, self.folder)
            self._handle = self.fs.open(self._path(start), "write")
        self._segment_size = self._allocated = 0

    def _undo(self, size: int) -> None:
        if self._handle is None:
            return
        try:
            self.fs.truncate(self._handle, size)
            self._allocated = size
        except OSError:
            pass  # the next open cuts the torn tail instead

    @property
    def idle(self) -> bool:
        """Whether no append is queued or in flight (the file may be closed)."""
        return not self._flushing and not self._queue

    def let_go(self) -> None:
        """Close the segment file as it is, zeros and torn tail alike. Idempotent.

        For a log opened by a read that another writer beat to it: only
        the writer that appends may cut anything.
        """
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self.fs.close(handle)

    def close(self) -> None:
        """Cut the zeros set aside off the segment file and close it. Idempotent."""
        if self._as_read:
            self.let_go()  # nothing appended: the zeros are not ours to cut
            return
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        try:
            if self._allocated > self._segment_size and self._zeros_after_us(handle):
                # no fsync: zeros that come back after a crash are read as space
                self.fs.truncate(handle, self._segment_size)
        except OSError:
            pass
        finally:
            self.fs.close(handle)

    def _zeros_after_us(self, handle: int) -> bool:
        """Whether nobody wrote past this log's last record since (so the zeros are ours).

        Another writer (an owner after us) appends from where our records end:
        a frame header is never all zeros, so its first bytes would be there.
        """
        head = self.fs.read_at(handle, HEADER_SIZE, self._segment_size)
        return bool(head) and not head.strip(b"\0")
