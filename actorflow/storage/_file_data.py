"""FileStore's decision log and blobs: the run's data, as files under its folder.

A mixin of :class:`~actorflow.storage._file.FileStore`; segments and their
group commit are in :mod:`actorflow.storage._filelog`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from actorflow.errors import RunNotFoundError, StorageError
from actorflow.storage._filelog import FileLog
from actorflow.storage._fs import write_atomic
from actorflow.storage._logwriter import finishes_when_cancelled
from actorflow.storage._manifests import validate_blob_ref
from actorflow.storage._records import validate_run_id

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import anyio

    from actorflow.storage._codec import Codec
    from actorflow.storage._fs import FileSystem
    from actorflow.storage._records import LogRecord

__all__ = ["FileData"]

T = TypeVar("T")


class FileData:
    """The log and blob methods of ``FileStore``, which provides what is declared here."""

    if TYPE_CHECKING:
        fs: FileSystem
        codec: Codec
        segment_bytes: int
        _logs: dict[str, FileLog]
        _log_lock: anyio.Lock
        _empty_logs: set[str]

        async def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T: ...
        def _dir(self, run_id: str, *parts: str) -> str: ...
        def _exists(self, run_id: str) -> bool: ...

    # --- log ------------------------------------------------------------------------

    async def _open_log(self, run_id: str) -> FileLog:
        log = self._logs.get(run_id)
        if log is not None and not log.broken:
            return log
        if log is None and run_id in self._empty_logs:
            # created here a moment ago: nothing to scan, the first write makes a segment
            self._empty_logs.discard(run_id)
            log = self._logs[run_id] = FileLog(
                self.fs, self.codec, run_id, self._dir(run_id, "log"), self.segment_bytes
            )
            return log
        async with self._log_lock:
            log = self._logs.get(run_id)
            if log is None or log.broken:
                if log is not None:
                    log.close()
                log = FileLog(
                    self.fs, self.codec, run_id, self._dir(run_id, "log"), self.segment_bytes
                )
                await self._call("open log", self._open_writer, run_id, log)
                self._logs[run_id] = log
        return log

    def _open_writer(self, run_id: str, log: FileLog) -> None:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        log.open_for_append()

    @finishes_when_cancelled
    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """See :meth:`Store.append`: concurrent appends share one write and fsync.

        Cancelled before the records are queued (waiting to open the log),
        nothing is appended. Once queued, they are written whatever happens
        to the caller: on trio the call then returns normally and the
        cancellation comes at the caller's next checkpoint; on asyncio it
        is raised after the write.
        """
        validate_run_id(run_id)
        log = await self._open_log(run_id)
        return await log.append(records)

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`. Never cuts a torn tail: only the writer does."""
        validate_run_id(run_id)
        log = FileLog(self.fs, self.codec, run_id, self._dir(run_id, "log"), self.segment_bytes)
        return await self._call("read log", self._read_log, run_id, log, start)

    def _read_log(self, run_id: str, log: FileLog, start: int) -> list[LogRecord]:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        return log.read(start)

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        validate_run_id(run_id)
        log = self._logs.get(run_id)
        if log is not None and not log.broken:
            return log.durable
        fresh = FileLog(self.fs, self.codec, run_id, self._dir(run_id, "log"), self.segment_bytes)
        return await self._call("read log", self._log_length, run_id, fresh)

    def _log_length(self, run_id: str, log: FileLog) -> int:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        return log.length()

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`: whole older segments go."""
        validate_run_id(run_id)
        log = FileLog(self.fs, self.codec, run_id, self._dir(run_id, "log"), self.segment_bytes)
        return await self._call("prune log", log.drop_segments_before, position)

    # --- blobs ----------------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`."""
        validate_run_id(run_id)
        return await self._call("put blob", self._put_blob, run_id, data)

    def _put_blob(self, run_id: str, data: bytes) -> str:
        # Addressed and sealed here, in the worker thread: sha256 and zstd let
        # go of the GIL for large states, so the loop runs on meanwhile, and a
        # blob stored already is not compressed again.
        address = self.codec.blob_address(data)
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        path = self._dir(run_id, "blobs", address)
        if not self.fs.exists(path):
            write_atomic(self.fs, path, self.codec.seal_blob(data, run_id=run_id, address=address))
        return address

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`."""
        validate_run_id(run_id)
        path = self._dir(run_id, "blobs", validate_blob_ref(ref))
        return await self._call("get blob", self._get_blob, run_id, ref, path)

    def _get_blob(self, run_id: str, ref: str, path: str) -> bytes:
        try:
            data = self.fs.read(path)
        except FileNotFoundError:
            if not self._exists(run_id):
                raise RunNotFoundError(run_id) from None
            raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}") from None
        return self.codec.load_blob(data, run_id=run_id, address=ref, location=path)

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        path = self._dir(run_id, "blobs", validate_blob_ref(ref))
        return await self._call("has blob", self.fs.exists, path)

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        names = await self._call("list blobs", self.fs.listdir, self._dir(run_id, "blobs"))
        return [n for n in names if not n.startswith(".")]

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob`."""
        path = self._dir(run_id, "blobs", validate_blob_ref(ref))
        return await self._call("delete blob", self._remove, path)

    def _remove(self, path: str) -> int:
        try:
            size = self.fs.size(path)
        except FileNotFoundError:
            return 0
        self.fs.unlink(path)
        return size
