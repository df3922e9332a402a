"""The PostgreSQL side of a PostgresStore: a small pool of synchronous connections.

psycopg's asynchronous API runs only on asyncio, and actorflow runs on trio
too, so queries run on the pool's synchronous connections in worker threads
(the file store's pool, cheaper to reach than ``anyio.to_thread``); the few
statements on a run's path borrow an idle connection and are sent from the
event loop's thread instead (``_direct``).
A connection lost mid-call is replaced and the call tried again: each call
the store makes is written so that a retry after an unknown outcome (a
commit whose answer was lost) changes nothing twice. Connecting is retried
a bounded number of times, then ``StoreUnavailableError``.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
import psycopg.conninfo
import psycopg.errors

from actorflow._log import get_logger
from actorflow.errors import StorageError, StoreUnavailableError
from actorflow.storage.file._threads import run_in_thread
from actorflow.storage.postgres._schema import migrate

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Connection", "Database", "describe_dsn"]

T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]

_log = get_logger(__name__)

#: libpq's TCP keepalives: a peer that vanished without closing is noticed in seconds
_KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}
#: the server's TCP keepalives for the store's sessions: a client whose machine vanished
#: (power, network: no FIN, no RST) is noticed in seconds, not the system's two hours, and
#: its claims (advisory locks) are freed; a DSN's own ``options`` may set others
_SERVER_KEEPALIVES = (
    "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"
)
#: how long what the server sent may stay unacknowledged before it drops the session
#: (``tcp_user_timeout``, PostgreSQL 12 on): keepalives wait while a reply is in flight,
#: and a vanished client's last reply would keep its claims for the retransmissions' minutes
_USER_TIMEOUT_MS = 11_000
#: errors after which the same call, tried again, may succeed
_RETRYABLE = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


def describe_dsn(dsn: str) -> str:
    """The DSN without its password: where the store is, for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql://(a DSN that does not parse)"
    host = params.get("host") or "localhost"
    port = params.get("port") or 5432
    user = f"{params['user']}@" if params.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{params.get('dbname') or ''}"


def _dsn_options(dsn: str) -> str:
    """The server options (``-c name=value ...``) the DSN gives, or nothing."""
    try:
        return str(psycopg.conninfo.conninfo_to_dict(dsn).get("options") or "")
    except psycopg.ProgrammingError:
        return ""  # connecting names what does not parse


def _bound_unacknowledged(conn: Connection, options: str) -> None:
    """Have the server drop the session once what it sent stays unacknowledged too long.

    Raises:
        psycopg.OperationalError: the connection was lost meanwhile (it is closed).
    """
    if "tcp_user_timeout" in options or conn.info.server_version < 120000:
        return  # the DSN sets it, or the server is older than the setting
    try:
        conn.execute(f"SET tcp_user_timeout = {_USER_TIMEOUT_MS}")
    except psycopg.OperationalError:
        conn.close()
        raise
    except psycopg.Error as exc:  # a proxy in front of the server may refuse it: go without
        _log.warning("postgres_user_timeout_refused", error=_first_line(exc))


class Database:
    """Connections to one database, with the store's schema on their search path.

    Args:
        dsn: a libpq connection string or URL.
        schema: the schema the store's tables live in (validated by the caller).
        pool_size: connections kept open for calls (more calls wait for one).
        connect_timeout: seconds one connection attempt may take.
        connect_attempts: attempts before ``StoreUnavailableError``.
    """

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        pool_size: int,
        connect_timeout: float,
        connect_attempts: int,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.location = f"{describe_dsn(dsn)} (schema {schema})"
        # the DSN's own server options (a read-only session, a statement timeout) are kept:
        # a keyword argument would replace them
        given = _dsn_options(dsn)
        self.options = f"{_SERVER_KEEPALIVES} {given} -c search_path={schema}".replace("  ", " ")
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.connect_attempts = connect_attempts
        self._idle: queue.LifoQueue[Connection] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(pool_size)
        self._ready = threading.Event()
        self._ready_lock = threading.Lock()
        self._closed = False
        self._all: set[Connection] = set()
        self._all_lock = threading.Lock()

    # --- connections -------------------------------------------------------------------

    def connect(self, *, migrate_schema: bool = True, purpose: str = "pool") -> Connection:
        """A new autocommit connection, after bounded retries (in a worker thread).

        Raises:
            StoreUnavailableError: the server stays unreachable, or refuses the login.
            StoreSchemaError: the schema is a newer actorflow's, or cannot be created.
        """
        if self._closed:
            raise StoreUnavailableError("connect", f"the store at {self.location} is closed")
        if migrate_schema:
            self._ensure_schema()
        delay = 0.05
        error: BaseException | None = None
        for attempt in range(self.connect_attempts):
            try:
                conn: Connection = psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    connect_timeout=max(1, round(self.connect_timeout)),
                    options=self.options,
                    application_name=f"actorflow {self.schema} {purpose}",
                    **_KEEPALIVES,
                )
                _bound_unacknowledged(conn, self.options)
            except psycopg.OperationalError as exc:
                error = exc
                if _refused_login(exc):
                    break  # a wrong password stays wrong
                if attempt + 1 < self.connect_attempts:
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                continue
            with self._all_lock:
                self._all.add(conn)
            return conn
        raise StoreUnavailableError(
            "connect",
            f"cannot connect to PostgreSQL at {self.location} "
            f"({self.connect_attempts} attempts): {_first_line(error)}; check that the server "
            "runs and the DSN's host, port, user, password and database",
        )

    def _ensure_schema(self) -> None:
        if self._ready.is_set():
            return
        with self._ready_lock:
            if self._ready.is_set():
                return
            conn = self.connect(migrate_schema=False)
            try:
                migrate(conn, self.schema, self.location)
            except psycopg.Error as exc:
                raise StorageError("open", f"{self.location}: {_first_line(exc)}") from exc
            finally:
                self.discard(conn)
            self._ready.set()

    def holds_store(self) -> bool:
        """Whether the schema holds a store's tables, asked without creating them.

        Raises:
            StoreUnavailableError: the server stays unreachable, or refuses the login.
            StorageError: PostgreSQL refused the query.
        """
        if self._ready.is_set():
            return True
        conn = self.connect(migrate_schema=False, purpose="probe")
        try:
            # the catalog, not information_schema: it lists tables this role may not read too
            row = conn.execute(
                "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = 'af_meta'",
                (self.schema,),
            ).fetchone()
        except psycopg.Error as exc:
            raise StorageError("open", f"{self.location}: {_first_line(exc)}") from exc
        finally:
            self.discard(conn)
        return row is not None

    def discard(self, conn: Connection) -> None:
        """Close a connection (broken, or no longer wanted)."""
        with self._all_lock:
            self._all.discard(conn)
        try:
            conn.close()
        except psycopg.Error:
            pass

    # --- calls -------------------------------------------------------------------------

    async def run(self, operation: str, fn: Callable[[Connection, bool], T]) -> T:
        """``fn(connection, retried)`` on a pooled connection, in a worker thread.

        ``retried`` is true when an earlier try lost its connection: ``fn`` then
        finds out what that try did before it writes. The call runs to its end
        even if the caller is cancelled (a commit is never abandoned halfway).

        Raises:
            StoreUnavailableError: the server cannot be reached.
            StorageError: PostgreSQL refused the call.
        """
        return await run_in_thread(self.call, operation, fn)

    def call(self, operation: str, fn: Callable[[Connection, bool], T]) -> T:
        """:meth:`run` in the calling thread (for the event stream's writer)."""
        self._slots.acquire()
        try:
            retried = False
            for attempt in range(5):
                conn = self._take()
                try:
                    result = fn(conn, retried)
                except psycopg.OperationalError as exc:
                    if conn.broken or conn.closed:
                        self.discard(conn)
                        _log.warning(
                            "postgres_connection_lost", operation=operation, error=_first_line(exc)
                        )
                        retried = True
                        continue
                    self._give(conn)
                    if isinstance(exc, _RETRYABLE) and attempt < 4:
                        continue
                    raise StorageError(operation, f"{self.location}: {_first_line(exc)}") from exc
                except psycopg.Error as exc:
                    self._give(conn)
                    if isinstance(exc, _RETRYABLE) and attempt < 4:
                        continue
                    raise StorageError(operation, f"{self.location}: {_first_line(exc)}") from exc
                except BaseException:
                    self._give(conn)
                    raise
                self._give(conn)
                return result
            raise StoreUnavailableError(
                operation, f"the connection to {self.location} was lost again and again"
            )
        finally:
            self._slots.release()

    def borrow_idle(self) -> Connection | None:
        """An idle pooled connection for the caller's own thread, without waiting; else None.

        None when every slot is busy, or no connection is open and idle (opening
        one blocks: that is for a worker thread). Hand it back with :meth:`give_back`.
        """
        if self._closed or not self._slots.acquire(blocking=False):
            return None
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            self._slots.release()
            return None
        if conn.closed or conn.broken:
            self.discard(conn)
            self._slots.release()
            return None
        return conn

    def give_back(self, conn: Connection) -> None:
        """Return a connection :meth:`borrow_idle` lent (a broken one is closed)."""
        try:
            self._give(conn)
        finally:
            self._slots.release()

    def _take(self) -> Connection:
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            return self.connect()
        if conn.closed or conn.broken:
            self.discard(conn)
            return self.connect()
        return conn

    def _give(self, conn: Connection) -> None:
        if self._closed or conn.closed or conn.broken:
            self.discard(conn)
            return
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self.discard(conn)  # left in a transaction by an error: not worth repairing
            return
        self._idle.put(conn)

    def close(self) -> None:
        """Close every connection. Idempotent."""
        self._closed = True
        with self._all_lock:
            conns, self._all = list(self._all), set()
        for conn in conns:
            try:
                conn.close()
            except psycopg.Error:
                pass


def _refused_login(exc: BaseException) -> bool:
    text = str(exc)
    return "password authentication failed" in text or "does not exist" in text


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
