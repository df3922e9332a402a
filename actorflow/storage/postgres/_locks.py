"""Session advisory locks on one dedicated connection: claims and slots held like a flock.

A claim, a queue slot or a limit slot is a PostgreSQL advisory lock taken by
the store's lock connection: the server ends it when that session ends, so a
killed process's claims are free at once (no lease to run out). Advisory
locks are re-entrant within a session, so the store also keeps which keys it
holds and refuses to take one twice. If the lock connection is lost, the next
call reconnects and takes the held keys again; one another session took
meanwhile is *lost* (and a claim's epoch, checked by every write, fences the
old owner whatever happened).
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, TypeVar

import psycopg

from actorflow._log import get_logger
from actorflow.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage.postgres._db import Connection, Database

__all__ = ["HELD_KEYS", "Locks", "lock_key"]

T = TypeVar("T")

_log = get_logger(__name__)

HELD_KEYS = """
    SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
"""The keys of every advisory lock held in this database (one bigint each)."""


def lock_key(schema: str, *parts: str) -> int:
    """A stable non-negative 63-bit advisory-lock key for ``parts`` in ``schema``."""
    digest = hashlib.blake2b("\0".join((schema, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


class Locks:
    """The store's lock connection and the keys it holds."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._held: set[int] = set()
        self._pending: list[int] = []  # released without waiting; unlocked on the next call
        self.lost: set[int] = set()
        """Keys held once and lost with a connection (another session took them meanwhile)."""

    def holds(self, key: int) -> bool:
        """Whether this store holds ``key``."""
        return key in self._held

    def call(self, operation: str, fn: Callable[[Connection], T]) -> T:
        """``fn`` on the lock connection, under its lock (in a worker thread)."""
        with self._lock:
            for _ in range(3):
                conn = self._connection()
                try:
                    self._flush(conn)
                    return fn(conn)
                except psycopg.OperationalError as exc:
                    if not (conn.broken or conn.closed):
                        raise StorageError(operation, f"{self._db.location}: {exc}") from exc
                    _log.warning("postgres_lock_connection_lost", error=str(exc).strip())
                    self._db.discard(conn)
                    self._conn = None
                except psycopg.Error as exc:
                    raise StorageError(operation, f"{self._db.location}: {exc}") from exc
            raise StorageError(
                operation, f"the lock connection to {self._db.location} keeps failing"
            )

    def _connection(self) -> Connection:
        conn = self._conn
        if conn is not None and not (conn.broken or conn.closed):
            return conn
        conn = self._conn = self._db.connect(purpose="locks")
        for key in sorted(self._held):  # taken again after a lost connection
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not (got and got[0]):
                self._held.discard(key)
                self.lost.add(key)
        return conn

    def _flush(self, conn: Connection) -> None:
        while self._pending:
            key = self._pending.pop()
            if key not in self._held:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def borrow(self) -> Connection | None:
        """The lock connection for the caller's own thread if it is free and open now, else None.

        Hand it back with :meth:`give_back`; keys it took meanwhile are noted with
        :meth:`took`. None also while releases wait to be sent (that blocks).
        """
        if self._pending or not self._lock.acquire(blocking=False):
            return None
        conn = self._conn
        if conn is None or conn.broken or conn.closed or self._pending:
            self._lock.release()
            return None
        return conn

    def give_back(self, conn: Connection) -> None:
        """The connection :meth:`borrow` lent; a lost one is dropped (the next call reconnects)."""
        try:
            if conn.broken or conn.closed:
                self._db.discard(conn)
                self._conn = None
        finally:
            self._lock.release()

    def took(self, key: int) -> None:
        """A key taken on a borrowed connection is held now."""
        self._held.add(key)
        self.lost.discard(key)

    def try_lock(self, conn: Connection, key: int) -> bool:
        """Take ``key`` without waiting (inside :meth:`call`); false if another holds it."""
        if key in self._held:
            return False
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row is not None and row[0]:
            self._held.add(key)
            self.lost.discard(key)
            return True
        return False

    def unlock(self, conn: Connection, key: int) -> None:
        """Give ``key`` up (inside :meth:`call`)."""
        if key in self._held:
            self._held.discard(key)
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def unlock_soon(self, key: int) -> None:
        """Give ``key`` up without waiting: at once if the connection is free, else next call."""
        if key not in self._held:
            return
        self._held.discard(key)
        self._pending.append(key)
        threading.Thread(target=self._flush_idle, daemon=True).start()

    def _flush_idle(self) -> None:
        with self._lock:
            conn = self._conn
            if conn is None or conn.broken or conn.closed:
                self._pending.clear()  # a new session holds none of them
                return
            try:
                self._flush(conn)
            except psycopg.Error as exc:
                _log.warning("postgres_unlock_failed", error=str(exc).strip())

    def ping(self) -> None:
        """Check the lock connection if it is idle; reconnect (taking keys again) if it is lost."""
        if not self._held or not self._lock.acquire(blocking=False):
            return
        try:
            conn = self._connection()
            try:
                conn.execute("SELECT 1")
            except psycopg.OperationalError:
                self._db.discard(conn)
                self._conn = None
                self._connection()
        except StorageError as exc:
            _log.warning("postgres_lock_connection_down", error=str(exc))
        except psycopg.Error as exc:
            _log.warning("postgres_lock_connection_down", error=str(exc).strip())
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the lock connection: the server frees every key it held."""
        with self._lock:
            conn, self._conn = self._conn, None
            self._held.clear()
        if conn is not None:
            self._db.discard(conn)
