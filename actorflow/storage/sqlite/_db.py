"""A SqliteStore's connections: one writer with group commit, readers in worker threads.

Every call runs in a worker thread (the file store's pool, so on asyncio and
trio alike). Reads take a connection from a small pool, one transaction
each: WAL mode lets them run beside the writer and see the last commit.

Writes go through one connection per store, under a lock. A write is a
function of that connection queued by its caller; whoever finds no commit
in flight carries everything queued so far to the writer thread, runs each
function under a savepoint of one transaction (a function that raises
undoes only its own changes and fails only its caller) and commits once:
concurrent writers share one transaction and one sync, as the file store's
appends share one fsync. The commit is made with ``synchronous=FULL`` (the
WAL fsynced) when any write in it must be durable, ``NORMAL`` otherwise
(written, not synced). SQLite's WAL is synced in order, so a durable commit
makes every commit before it durable too: a write made without a sync
becomes durable with the next one that syncs. But SQLite syncs only a
commit that writes a page, and a durable write may change no byte (a
change made already, unsynced, by this connection or another): then the
commit also bumps a counter in ``meta``, so that it writes and syncs what
its write read (:meth:`Database._must_write`).

Several processes may use one file: SQLite's lock serialises their
transactions, and a writer waits up to ``busy_timeout`` for another's.
A forked child opens connections of its own (SQLite's may not cross a fork).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import sniffio

from actorflow.errors import (
    ActorflowError,
    CorruptedDataError,
    StorageError,
    StoreReadOnlyError,
    StoreSchemaError,
    StoreUnavailableError,
)
from actorflow.storage.file._threads import run_in_thread
from actorflow.storage.sqlite._schema import SCHEMA_VERSION, check_schema

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Database", "translate"]

T = TypeVar("T")

_READERS = 4
"""Reader connections a store keeps open between calls."""

WAL_PAGES = 256
"""Pages the WAL holds before a commit checkpoints it (fewer than SQLite's default)."""

_live: weakref.WeakSet[Database] = weakref.WeakSet()
_abandoned: list[sqlite3.Connection] = []
"""A forked child's copies of its parent's connections: never used, never closed."""


def _forget_in_child() -> None:
    for db in list(_live):
        db.forget_connections()


os.register_at_fork(after_in_child=_forget_in_child)


def translate(exc: sqlite3.Error, operation: str, location: str) -> ActorflowError:
    """The named error for what SQLite raised during ``operation``."""
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and "file is not a database" in text:
        return StoreSchemaError(
            location,
            "none (the file is not an SQLite database)",
            f"actorflow SQLite schema {SCHEMA_VERSION}",
            "point the store at an actorflow store's file, or at a new file's path",
        )
    if isinstance(exc, sqlite3.DatabaseError) and "malformed" in text:
        error: ActorflowError = CorruptedDataError(
            location,
            f"SQLite says: {text}; check it with `sqlite3 {location} 'PRAGMA integrity_check'` "
            "and restore the file from a backup",
        )
        return error
    if "readonly" in text or "read-only" in text:
        return StoreReadOnlyError(location, operation)
    if "unable to open database file" in text:
        folder = os.path.dirname(os.path.abspath(location))
        return StoreUnavailableError(
            operation,
            f"cannot open {location} ({text}); make sure the folder {folder} exists and "
            "this process may write it",
        )
    if "locked" in text or "busy" in text:
        return StorageError(
            operation,
            f"{location} stayed locked by another connection past the busy timeout ({text}); "
            "retry, or raise the store's busy_timeout",
        )
    return StorageError(operation, f"{location}: SQLite says: {text}")


class Write(Generic[T]):
    """One queued write: a function of the writer connection, and its outcome."""

    __slots__ = ("after", "done", "durable", "error", "fn", "prepare", "result", "undo")

    def __init__(self, fn: Callable[[sqlite3.Connection], T], durable: bool) -> None:
        self.fn = fn
        self.durable = durable
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None
        self.undo: Callable[[], None] | None = None
        self.after: Callable[[], None] | None = None
        self.prepare: Callable[[], bool] | None = None


class Database:
    """The file's connections and the queue of writes waiting for the next commit.

    Args:
        path: the database file.
        busy_timeout: seconds a connection waits for another's lock.
    """

    def __init__(self, path: str, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._guard = threading.Lock()  # opening, and the reader pool
        self._write_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._sync: str | None = None  # the writer's synchronous setting
        self._readers: list[sqlite3.Connection] = []
        self._ready = False
        self._read_only: str | None = None  # the URI mode of a file this process cannot write
        self._grown = False  # the WAL was made full-size (before the first synced commit)
        self._unsynced = True  # the writer may have committed without a sync since it last synced
        self._version: int | None = None  # the writer's data_version at its last commit
        self._queue: list[Write[Any]] = []
        self._flushing = False
        self._idle: anyio.Event | None = None
        self.commits = 0
        """Transactions committed (for tests and benchmarks)."""
        _live.add(self)

    # --- connections (worker threads) -----------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        target, uri = self.path, False
        if self._read_only is not None:  # this process may not write the file
            quoted = urllib.parse.quote(os.path.abspath(self.path))
            target, uri = f"file:{quoted}?{self._read_only}", True
        conn = sqlite3.connect(
            target,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
            uri=uri,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return conn

    def _open(self) -> None:
        """Open the writer, check (or create) the schema; once per store. Blocks."""
        with self._guard:
            if self._ready:
                return
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise StoreUnavailableError(
                    "open",
                    f"the folder {folder} of {self.path} does not exist; create it, or "
                    "give a path in an existing folder",
                )
            try:
                self._writer = self._open_writer()
            except sqlite3.OperationalError:
                if not self._unwritable():
                    raise
                self._open_read_only()
            self._ready = True

    def _open_writer(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            check_schema(conn, self.path)
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _unwritable(self) -> bool:
        """Whether the file exists and this process may not write it or its folder."""
        folder = os.path.dirname(os.path.abspath(self.path))
        return os.path.isfile(self.path) and not (
            os.access(self.path, os.W_OK) and os.access(folder, os.W_OK)
        )

    def _open_read_only(self) -> None:
        """Open a file this process may only read: readers work, every write is refused.

        Read-only first (it sees other processes' commits); where SQLite
        cannot open the WAL that way (its ``-shm`` file is gone and cannot be
        made: a read-only mount), as immutable: nobody can write it there.
        """
        for mode in ("mode=ro", "immutable=1"):
            self._read_only = mode
            conn = self._connect()
            try:
                check_schema(conn, self.path, create=False)
            except sqlite3.OperationalError:
                if mode == "immutable=1":
                    raise
                continue
            finally:
                conn.close()
            return

    def _grow_wal(self, conn: sqlite3.Connection) -> None:
        """Make a small WAL file as big as it gets, so commits rewrite it instead of growing it.

        A commit that grows the file makes its sync commit the file's new size
        too (the file system's journal), which costs much more than the write
        (benchmarks/RESULTS.md, "SQLite store"); the file store sets space
        aside for its log the same way. The padding row's pages are committed
        (the WAL passes ``WAL_PAGES``, so that commit checkpoints it) and
        freed again; SQLite then writes the WAL from its start, within the
        size it has.
        """
        try:
            size = os.path.getsize(f"{self.path}-wal")
        except OSError:
            return
        if size >= WAL_PAGES * 4096:
            return
        self._sync = "NORMAL"
        conn.execute("PRAGMA synchronous = NORMAL")
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('wal', zeroblob(?))",
                (WAL_PAGES * 4096,),
            )
            conn.execute("COMMIT")
            conn.execute("DELETE FROM meta WHERE key = 'wal'")
        except sqlite3.Error:  # only speed depends on it (a full disk, a busy file)
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def forget_connections(self) -> None:
        """In a forked child: drop the parent's connections unused (never close them)."""
        _abandoned.extend(c for c in [self._writer, *self._readers] if c is not None)
        self._writer, self._readers, self._ready, self._sync = None, [], False, None
        self._unsynced, self._version = True, None
        self._queue, self._flushing, self._idle = [], False, None
        self._guard = threading.Lock()
        self._write_lock = threading.Lock()

    def close(self) -> None:
        """Close every connection; the next call opens the file again. Blocks.

        Idempotent; waits for a commit in flight.
        """
        with self._write_lock, self._guard:
            conns = [c for c in [self._writer, *self._readers] if c is not None]
            self._writer, self._readers, self._ready = None, [], False
            self._read_only = None  # the next opening finds out again
            self._grown = False
            self._unsynced, self._version = True, None
        for conn in conns:
            conn.close()

    # --- reading --------------------------------------------------------------------

    async def read(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` in one read transaction, in a worker thread."""
        return await run_in_thread(self._read, operation, fn, args)

    def _read(self, operation: str, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            if not self._ready:
                self._open()
            with self._guard:
                conn = self._readers.pop() if self._readers else None
            if conn is None:
                conn = self._connect()
            sound = False
            try:
                conn.execute("BEGIN")
                try:
                    return fn(conn, *args)
                finally:
                    conn.execute("COMMIT")
                    sound = True  # an error of ``fn``'s (no such run) leaves it usable
            finally:
                with self._guard:
                    keep = sound and self._ready and len(self._readers) < _READERS
                    if keep:
                        self._readers.append(conn)
                if not keep:
                    conn.close()
        except sqlite3.Error as exc:
            raise translate(exc, operation, self.path) from exc
        except OSError as exc:
            raise StorageError(operation, f"{self.path}: {exc}") from exc

    # --- writing --------------------------------------------------------------------

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        durable: bool,
        undo: Callable[[], None] | None = None,
        after: Callable[[], None] | None = None,
        prepare: Callable[[], bool] | None = None,
    ) -> T:
        """Run ``fn`` in the next commit; durable when it returns if ``durable``.

        Once queued the write is carried out whatever happens to the caller:
        cancelled, it still waits for the outcome (on trio the cancellation
        comes at its next checkpoint; on asyncio it is raised after).
        ``undo`` is called if the commit fails after ``fn`` ran, ``after``
        (in the writer thread; it must not raise) once ``fn``'s changes are committed.
        ``prepare`` runs in the writer thread before the transaction, outside
        its lock (sealing a snapshot: CPU work that needs no lock, without a
        worker-thread trip of its own), and returns whether the write must
        be durable after all; if it raises, ``fn`` does not run.
        """
        op: Write[T] = Write(fn, durable)
        op.undo, op.after, op.prepare = undo, after, prepare
        self._queue.append(op)
        try:
            await self._until_done(op)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._until_done(op)
            if sniffio.current_async_library() == "asyncio":
                raise
        return self._outcome(op)

    def _outcome(self, op: Write[T]) -> T:
        error = op.error
        if isinstance(error, sqlite3.Error):
            raise translate(error, "write", self.path) from error
        if error is not None:
            raise error
        return op.result  # type: ignore[return-value]

    async def _until_done(self, op: Write[Any]) -> None:
        while not op.done:
            if self._flushing:
                assert self._idle is not None
                await self._idle.wait()
            else:
                await self._flush()

    async def _flush(self) -> None:
        self._flushing = True
        self._idle = anyio.Event()
        batch, self._queue = self._queue, []
        try:
            await run_in_thread(self.commit, batch)
        finally:
            # on cancellation too; by then the thread has finished, or never ran
            left = [op for op in batch if not op.done]
            self._queue = left + self._queue
            self._flushing = False
            self._idle.set()

    def commit(self, batch: list[Write[Any]]) -> None:
        """Run ``batch`` in one transaction and commit it (from a worker thread). Blocks.

        Every write of the batch is marked done, with its result or error.
        """
        for op in batch:
            if op.prepare is not None:
                try:
                    op.durable = op.prepare() or op.durable
                except Exception as exc:  # the caller's to see; its write is left out
                    op.error = exc
        with self._write_lock:
            try:
                self._commit(batch)
            except BaseException as exc:
                error: BaseException = exc
                if isinstance(exc, sqlite3.Error):
                    error = translate(exc, "write", self.path)
                    error.__cause__ = exc
                elif isinstance(exc, OSError):
                    error = StorageError("write", f"{self.path}: {exc}")
                    error.__cause__ = exc
                for op in batch:
                    if op.error is None:
                        op.error, op.result = error, None
                        if op.undo is not None:
                            op.undo()  # it ran, and what it took outside the file goes
            finally:
                for op in batch:
                    op.done = True

    def write_now(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool) -> T:
        """A write of its own transaction, blocking (from a thread that is no event loop's)."""
        op: Write[T] = Write(fn, durable)
        self.commit([op])
        return self._outcome(op)

    def _must_write(self, version: int) -> bool:
        """Whether a durable commit must change a page of its own to be synced.

        SQLite syncs the WAL only at a commit that writes to it; one whose
        writes changed no byte (a manifest rewritten as it was) writes
        nothing and syncs nothing, and what it read may be a commit not yet
        synced: this connection's, if it committed without a sync since it
        last synced, or another connection's, if one committed since this
        one last did (``version``, its ``data_version`` now, differs).
        """
        return self._unsynced or version != self._version

    def _commit(self, batch: list[Write[Any]]) -> None:
        if not self._ready:
            self._open()
        conn = self._writer
        if conn is None:  # opened read-only: this process may not write the file
            raise StoreReadOnlyError(self.path, "write")
        sync = "FULL" if any(op.durable for op in batch) else "NORMAL"
        if sync == "FULL" and not self._grown:
            self._grow_wal(conn)  # before this process's first synced commit; readers never
            self._grown = True
        if sync != self._sync:
            conn.execute(f"PRAGMA synchronous = {sync}")
            self._sync = sync
        batch = [op for op in batch if op.error is None]  # a failed prepare: nothing to write
        if not batch:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if len(batch) == 1:
                op = batch[0]
                try:
                    op.result = op.fn(conn)
                except Exception as exc:  # the caller's to see; nothing to commit
                    op.error = exc
                    conn.execute("ROLLBACK")
                    return
            else:
                for op in batch:
                    conn.execute("SAVEPOINT write")
                    try:
                        op.result = op.fn(conn)
                    except Exception as exc:  # undoes this write alone
                        op.error = exc
                        conn.execute("ROLLBACK TO write")
                    conn.execute("RELEASE write")
            if sync == "FULL" and self._must_write(version):
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('synced', 1) "
                    "ON CONFLICT (key) DO UPDATE SET value = value + 1"
                )
            conn.execute("COMMIT")
            self.commits += 1
            self._unsynced, self._version = sync != "FULL", version
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        for op in batch:
            if op.after is not None and op.error is None:
                op.after()
