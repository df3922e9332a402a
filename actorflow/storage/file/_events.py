"""A run's event stream in its folder: ``events/<first position>.evs`` segments, never synced.

Each writer (one per attempt of the run's owner) starts a new segment at
its first write, named by that batch's first position, and appends whole
batches to it with one ``write`` each: no fsync, so a power loss may take
the newest events, and a killed writer may leave a torn batch at the end of
its segment, which readers skip (the next writer starts a segment of its
own, never appending after it). Past ``segment_bytes`` a segment is closed
and the next batch starts another; the oldest segments are deleted while
the stream holds more than ``keep_bytes``.

A reader lists the segments, finds the one holding the position it asks
for and walks its batches by their plain prefixes, opening only those it
returns. It remembers where the last read of each run ended (segment and
offset), so a reader that follows a run reads only what is new.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from actorflow._log import get_logger
from actorflow.errors import CorruptedDataError, StorageError, UnreadableFileError
from actorflow.storage._event_stream import (
    EventSlice,
    StreamedEvent,
    frame_length,
    open_batch,
    seal_batch,
)
from actorflow.storage.file._layout import os_error_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["EventFileWriter", "EventFiles"]

_log = get_logger("actorflow.storage")

_SUFFIX = ".evs"


def _name(first: int) -> str:
    return f"{first:020d}{_SUFFIX}"


def _segments(folders: RunFolders, folder: str) -> list[tuple[int, str]]:
    """``(first position, name)`` of the folder's segments, oldest first ([] if none)."""
    try:
        names = folders.fs.listdir(folder)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
            found.append((int(name[: -len(_SUFFIX)]), name))
    found.sort()
    return found


def _whole_end(data: memoryview) -> int | None:
    """The position after the last whole batch of a segment, or None if it holds none."""
    end = None
    offset = 0
    while True:
        try:
            frame = frame_length(data[offset:])
        except CorruptedDataError:
            return end
        if frame is None:
            return end
        first, count, length = frame
        end = first + count
        offset += length


class EventFileWriter:
    """Writes one attempt's batches to a run's ``events`` folder. Blocks; one thread at a time."""

    def __init__(
        self,
        folders: RunFolders,
        codec: Codec,
        run_id: str,
        *,
        segment_bytes: int,
        keep_bytes: int,
    ) -> None:
        self._folders = folders
        self._codec = codec
        self._run_id = run_id
        self._segment_bytes = segment_bytes
        self._keep_bytes = keep_bytes
        self._folder = folders.run(run_id, "events")
        self._next: int | None = None  # the position after the last event written
        self._handle: int | None = None
        self._size = 0  # of the open segment
        self._kept: list[tuple[str, int]] = []  # (name, size) of the closed segments, oldest first
        self._current = ""  # the open segment's name

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        """See :meth:`EventStreamWriter.write`: one ``write`` to the open segment."""
        try:
            self._write(events, lost, end)
        except OSError as exc:
            if self._handle is not None:  # the next write starts a segment: this one still counts
                self._kept.append((self._current, self._size))
            self.close()
            raise StorageError("stream events", os_error_text(exc)) from exc

    def _write(self, events: Sequence[bytes], lost: int, end: bool) -> None:
        fs = self._folders.fs
        if self._next is None:
            self._next = self._resume()
        first = self._next + lost
        if self._handle is None:
            self._handle = self._start(first)
        data = seal_batch(self._codec, events, run_id=self._run_id, first=first, end=end)
        fs.write(self._handle, data)
        self._next = first + len(events)
        self._size += len(data)
        if self._size >= self._segment_bytes:
            self._rotate()

    def _resume(self) -> int:
        """Where the stream goes on: after the last whole batch any earlier writer wrote."""
        fs = self._folders.fs
        self._folders.require(self._run_id)
        fs.makedirs(self._folder)
        segments = _segments(self._folders, self._folder)
        for _, name in segments:
            self._kept.append((name, fs.size(os.path.join(self._folder, name))))
        for first, name in reversed(segments):
            try:
                data = fs.read(os.path.join(self._folder, name))
            except UnreadableFileError:
                continue  # no segment a writer made: passed over, as readers do
            end = _whole_end(memoryview(data))
            if end is not None:
                return max(end, first)
        return segments[-1][0] if segments else 0

    def _start(self, first: int) -> int:
        """A new segment for batches from ``first`` on (replacing one that holds no whole batch)."""
        fs = self._folders.fs
        name = _name(first)
        path = os.path.join(self._folder, name)
        # a segment of this name holds no whole batch (else the stream would be past
        # ``first``): a writer killed mid-batch left it, and nothing is appended after a tear
        self._kept = [(n, s) for n, s in self._kept if n != name]
        try:
            handle = fs.open(path, "create")
        except FileExistsError:
            fs.unlink(path)
            handle = fs.open(path, "create")
        self._size = 0
        self._current = name
        return handle

    def _rotate(self) -> None:
        """Close the full segment; delete the oldest while the stream is over its bound."""
        fs = self._folders.fs
        assert self._handle is not None
        fs.close(self._handle)
        self._handle = None
        self._kept.append((self._current, self._size))
        total = sum(size for _, size in self._kept)
        while len(self._kept) > 1 and total > self._keep_bytes:
            name, size = self._kept.pop(0)
            try:
                fs.unlink(os.path.join(self._folder, name))
            except FileNotFoundError:
                pass
            total -= size

    def close(self) -> None:
        """See :meth:`EventStreamWriter.close`."""
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                self._folders.fs.close(handle)
            except OSError:
                pass


class EventFiles:
    """The event streams of a file store's runs: writers, and reads that remember their place.

    Args:
        folders: the store's run folders.
        codec: seals and opens batches.
        keep_bytes: about how many bytes of a run's stream are kept (older segments go).
    """

    def __init__(self, folders: RunFolders, codec: Codec, keep_bytes: int) -> None:
        self._folders = folders
        self._codec = codec
        self.keep_bytes = keep_bytes
        self.segment_bytes = max(keep_bytes // 8, 4096)
        # run id -> (the position a read ended at, its segment, the offset there,
        # whether the batch before that offset ended a writer's stream)
        self._places: dict[str, tuple[int, str, int, bool]] = {}

    def writer(self, run_id: str) -> EventFileWriter:
        """A writer for one attempt of the run (opens nothing yet)."""
        return EventFileWriter(
            self._folders,
            self._codec,
            run_id,
            segment_bytes=self.segment_bytes,
            keep_bytes=self.keep_bytes,
        )

    def forget(self, run_id: str) -> None:
        """Drop what is remembered of the run's reads (the run is being deleted)."""
        self._places.pop(run_id, None)

    def read(self, run_id: str, start: int, limit: int) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events`. Blocks."""
        folder = self._folders.run(run_id, "events")
        segments = _segments(self._folders, folder)
        if not segments:
            return EventSlice(events=[], next=start, ended=True)
        index, offset, ended = self._place(run_id, segments, start)
        reader = _SliceReader(self._codec, run_id, start, limit, ended)
        fs = self._folders.fs
        for i in range(index, len(segments)):
            name = segments[i][1]
            path = os.path.join(folder, name)
            try:
                if offset and i == len(segments) - 1 and fs.size(path) <= offset:
                    break  # a follower at the end: nothing new (a stat, not a read)
                data = memoryview(fs.read(path))
            except FileNotFoundError:
                offset = 0
                continue  # deleted by the writer's bound: the next one goes on
            except UnreadableFileError as exc:  # no file a writer made (a FIFO, say)
                _log.warning("event_stream_damaged", location=path, error=str(exc))
                offset = 0
                continue
            offset = reader.walk(data, offset, path, last=i == len(segments) - 1)
            if reader.full:
                break
            if i < len(segments) - 1:
                offset = 0
        ended = reader.finish()
        self._places[run_id] = (reader.next, segments[i][1], offset, ended)
        return EventSlice(events=reader.events, next=reader.next, ended=ended)

    def _place(
        self, run_id: str, segments: list[tuple[int, str]], start: int
    ) -> tuple[int, int, bool]:
        """The segment (index) and offset to read ``start`` from, and the end flag before it."""
        place = self._places.get(run_id)
        if place is not None and place[0] == start:
            for i, (_, name) in enumerate(segments):
                if name == place[1]:
                    return i, place[2], place[3]
        index = 0
        for i, (first, _) in enumerate(segments):
            if first <= start:
                index = i
        return index, 0, False


class _SliceReader:
    """Collects the events of one read, batch by batch, from ``start`` on, up to ``limit``."""

    def __init__(self, codec: Codec, run_id: str, start: int, limit: int, ended: bool) -> None:
        self._codec = codec
        self._run_id = run_id
        self._start = start
        self._limit = limit
        self.events: list[StreamedEvent] = []
        self.next = start
        self.ended = ended
        self.full = False
        self._skipped: tuple[memoryview, str] | None = None  # the last batch passed over unopened

    def finish(self) -> bool:
        """Whether the stream, as read, ends with a batch that ended a writer's stream."""
        if self._skipped is not None and not self.full:
            frame, location = self._skipped
            try:
                batch = open_batch(
                    self._codec, bytes(frame), run_id=self._run_id, location=location
                )
            except CorruptedDataError:
                return False
            self.ended = batch.end
        return self.ended

    def walk(self, data: memoryview, offset: int, location: str, *, last: bool) -> int:
        """Take the whole batches of one segment from ``offset``; the offset reading stopped at.

        A batch cut short ends the walk: the last segment's writer is still
        at it, an older segment's was killed (the next segment goes on).
        """
        while offset < len(data):
            try:
                frame = frame_length(data[offset:])
            except CorruptedDataError as exc:
                if not last:
                    _log.warning("event_stream_damaged", location=location, error=str(exc))
                return offset
            if frame is None:
                return offset
            first, count, length = frame
            frame_bytes = data[offset : offset + length]
            if first + count > self._start or (count == 0 and first >= self._start):
                self._skipped = None
                if not self._take(bytes(frame_bytes), location):
                    return offset  # full: this batch is read again next time
            else:
                self._skipped = (frame_bytes, location)
            offset += length
        return offset

    def _take(self, frame: bytes, location: str) -> bool:
        try:
            batch = open_batch(self._codec, frame, run_id=self._run_id, location=location)
        except CorruptedDataError as exc:
            _log.warning("event_stream_damaged", location=location, error=str(exc))
            return True
        fresh = [e for e in batch.events if e.position >= self.next]
        room = self._limit - len(self.events)
        if len(fresh) > room:
            self.events.extend(fresh[:room])
            if room:
                self.next = fresh[room - 1].position + 1
            self.full = True
            self.ended = False
            return False
        self.events.extend(fresh)
        self.next = max(self.next, batch.first + len(batch.events))
        self.ended = batch.end
        return True
