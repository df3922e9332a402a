"""A file store's decision logs: one ``FileLog`` kept open per run it appends to.

Appends go to the run's open ``FileLog`` (group commit, :mod:`._log`); reads,
lengths and pruning open the segments afresh, so they see other processes'
appends too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from actorflow.storage.file._log import FileLog

if TYPE_CHECKING:
    from actorflow.storage._records import LogRecord
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["LogFiles"]


class LogFiles:
    """Every run's log under ``folders``; use from the store's event loop.

    Args:
        folders: where the runs are.
        codec: how records are sealed.
        segment_bytes: a segment is closed and a new one started past this size.
    """

    def __init__(self, folders: RunFolders, codec: Codec, segment_bytes: int) -> None:
        self._folders = folders
        self._codec = codec
        self.segment_bytes = segment_bytes
        self._open: dict[str, FileLog] = {}
        self._lock = anyio.Lock()
        # runs this store created and claimed, not appended to yet: their logs are empty
        self._empty: set[str] = set()

    def _log(self, run_id: str) -> FileLog:
        # made on the loop: a FileLog holds an anyio.Event
        folder = self._folders.run(run_id, "log")
        return FileLog(self._folders.fs, self._codec, run_id, folder, self.segment_bytes)

    def mark_empty(self, run_id: str) -> None:
        """The run was just created here and nobody else can write it while we hold it."""
        self._empty.add(run_id)

    def not_empty(self, run_id: str) -> None:
        """Another owner may append to the run from now on."""
        self._empty.discard(run_id)

    async def writer(self, run_id: str) -> FileLog:
        """The run's log, opened for appends (its end found, a torn tail cut) once.

        Raises:
            RunNotFoundError: no such run.
        """
        log = self._open.get(run_id)
        if log is not None and not log.broken:
            return log
        if log is None and run_id in self._empty:
            # created here a moment ago: nothing to scan, the first write makes a segment
            self._empty.discard(run_id)
            log = self._open[run_id] = self._log(run_id)
            return log
        async with self._lock:
            log = self._open.get(run_id)
            if log is None or log.broken:
                if log is not None:
                    log.close()
                log = self._log(run_id)
                await self._folders.call("open log", self._open_for_append, run_id, log)
                self._open[run_id] = log
        return log

    def _open_for_append(self, run_id: str, log: FileLog) -> None:
        self._folders.require(run_id)
        log.open_for_append()

    async def read(self, run_id: str, start: int, *, for_append: bool = False) -> list[LogRecord]:
        """Records from ``start``; a torn tail is left out, never cut (only the writer does).

        With ``for_append`` (this store holds the run's claim: it reads to go
        on appending) the log is opened for appends in the same worker-thread
        trip, from the same scan, unless it is open already.
        """
        if for_append and run_id not in self._open and run_id not in self._empty:
            async with self._lock:
                if run_id not in self._open:
                    log = self._log(run_id)
                    records = await self._folders.call(
                        "read log", self._read, run_id, log, start, True
                    )
                    if run_id in self._open or run_id in self._empty:
                        log.let_go()  # a writer came meanwhile: it is the one that appends
                    else:
                        self._open[run_id] = log
                    return records
        log = self._log(run_id)
        return await self._folders.call("read log", self._read, run_id, log, start, False)

    def _read(self, run_id: str, log: FileLog, start: int, for_append: bool) -> list[LogRecord]:
        self._folders.require(run_id)
        return log.read(start, open_for_append=for_append)

    async def length(self, run_id: str) -> int:
        """The log's length: this store's open log knows it, others scan the last segment."""
        log = self._open.get(run_id)
        if log is not None and not log.broken:
            return log.durable
        fresh = self._log(run_id)
        return await self._folders.call("read log", self._length, run_id, fresh)

    def _length(self, run_id: str, log: FileLog) -> int:
        self._folders.require(run_id)
        return log.length()

    async def truncate_before(self, run_id: str, position: int) -> int:
        """Delete whole segments below ``position``; return the records dropped."""
        log = self._log(run_id)
        return await self._folders.call("prune log", log.drop_segments_before, position)

    def forget(self, run_id: str) -> None:
        """Let go of the run's open log file (closed now, unless an append is in flight).

        Appends write at the offset this store last knew, so a log kept open
        across another owner's appends would write over them.
        """
        log = self._open.get(run_id)
        if log is not None and log.idle:  # one in use stays, to be closed later
            del self._open[run_id]
            log.close()

    def drop(self, run_id: str) -> None:
        """Close the run's log whatever it is doing (the run is being deleted)."""
        log = self._open.pop(run_id, None)
        if log is not None:
            log.close()
        self._empty.discard(run_id)

    def close(self) -> None:
        """Close every open log file."""
        for log in self._open.values():
            log.close()
        self._open.clear()
        self._empty.clear()
