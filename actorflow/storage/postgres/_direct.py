"""One statement on a pooled connection, sent from the event loop's own thread.

Every other call of a PostgresStore runs its queries in a worker thread
(``Database.run``): psycopg's asynchronous connections run only on asyncio.
On a run's path, in ``sync`` durability, that trip costs as much as the
commit itself: a thread to wake, then the GIL to win back from the event
loop when the answer comes. Here a statement already set up on an idle
connection is driven by psycopg's own non-blocking generators (the ones its
asynchronous connections use), waiting on the connection's socket with
anyio, so on asyncio and trio alike.

Only a single statement in autocommit (it commits by itself) and only small
ones: the caller falls back to the worker thread for anything else. Once
sent, a statement is driven to its end even if the caller is cancelled
meanwhile (a commit is never abandoned halfway); the cancellation then takes
effect at the caller's next checkpoint.
"""

from __future__ import annotations

import select
from typing import TYPE_CHECKING

import anyio
import sniffio
from psycopg import errors, generators, pq
from psycopg.waiting import READY_R, READY_W, WAIT_R, WAIT_W

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from psycopg.pq.abc import PGconn, PGresult

    from actorflow.storage.postgres._db import Database

__all__ = ["BYTEA", "DIRECT_BYTES", "TEXT", "UNKNOWN", "Unknown", "execute", "read_rows"]

#: parameter types: text whose type the statement's casts give (OID 0), or bytea (binary)
TEXT = 0
BYTEA = 17
_TEXT_FORMAT, _BINARY_FORMAT = 0, 1

#: a batch of log records larger than this goes through a worker thread
DIRECT_BYTES = 256 * 1024


class Unknown:
    """A statement whose connection was lost before its answer came: it may have landed."""


UNKNOWN = Unknown()


async def execute(
    pgconn: PGconn,
    query: bytes,
    params: Sequence[bytes | None],
    types: Sequence[int],
    *,
    binary: bool = False,
) -> PGresult:
    """Run one statement with its parameters on ``pgconn`` (idle, autocommit); its result.

    ``params`` are text (``TEXT``) or raw bytes (``BYTEA``), as ``types`` says;
    the result's values are text, or with ``binary`` PostgreSQL's binary forms.

    Raises:
        psycopg.Error: the server refused the statement, or the connection was lost.
    """
    formats = [_BINARY_FORMAT if t == BYTEA else _TEXT_FORMAT for t in types]
    pgconn.send_query_params(
        query,
        params,
        param_types=types,
        param_formats=formats,
        result_format=_BINARY_FORMAT if binary else _TEXT_FORMAT,
    )
    results: list[PGresult] = await _drive(generators.execute(pgconn), pgconn.socket)
    if not results:
        raise errors.InternalError("the server sent no result")
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise errors.error_from_result(result)
    return results[-1]


async def read_rows(db: Database, query: bytes, run_id: str) -> PGresult | None:
    """A read of one run's rows from the event loop's thread (binary values).

    ``None`` when it cannot be done so (no idle connection, an error): the
    worker thread's way then reads, and says what went wrong.
    """
    conn = db.borrow_idle()
    if conn is None:
        return None
    try:
        return await execute(conn.pgconn, query, [run_id.encode()], [TEXT], binary=True)
    except errors.Error:
        return None
    finally:
        db.give_back(conn)


async def _drive(gen: Generator[int, int, list[PGresult]], fd: int) -> list[PGresult]:
    """Run psycopg's generator to its end: wait on ``fd`` for what it asks."""
    try:
        wanted = next(gen)
        while True:
            ready = _poll(fd, wanted)
            if not ready:
                ready = await _wait(fd, wanted)
            wanted = gen.send(ready)
    except StopIteration as stop:
        done: list[PGresult] = stop.value
        return done


def _poll(fd: int, wanted: int) -> int:
    """What ``fd`` is ready for now, of what is ``wanted`` (no wait)."""
    readers = [fd] if wanted & WAIT_R else []
    writers = [fd] if wanted & WAIT_W else []
    r, w, _ = select.select(readers, writers, [], 0)
    return (READY_R if r else 0) | (READY_W if w else 0)


async def _wait(fd: int, wanted: int) -> int:
    """Wait until ``fd`` is ready for some of ``wanted``, through a cancellation."""
    ready = 0
    if sniffio.current_async_library() == "trio":
        try:
            return await _wait_once(fd, wanted)
        except anyio.get_cancelled_exc_class():
            # trio raises the cancellation again at the caller's next checkpoint
            with anyio.CancelScope(shield=True):
                ready = await _wait_once(fd, wanted)
    else:
        with anyio.CancelScope(shield=True):
            ready = await _wait_once(fd, wanted)
    return ready


async def _wait_once(fd: int, wanted: int) -> int:
    if wanted == WAIT_R:
        await anyio.wait_readable(fd)
        return READY_R
    if wanted == WAIT_W:
        await anyio.wait_writable(fd)
        return READY_W
    # both (sending a statement the socket could not take at once): whichever comes
    async with anyio.create_task_group() as tg:

        async def readable() -> None:
            await anyio.wait_readable(fd)
            tg.cancel_scope.cancel()

        async def writable() -> None:
            await anyio.wait_writable(fd)
            tg.cancel_scope.cancel()

        tg.start_soon(readable)
        tg.start_soon(writable)
    return _poll(fd, wanted)
