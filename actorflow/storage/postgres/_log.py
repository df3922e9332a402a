"""A PostgresStore's decision logs: ``af_log``, (run, position) -> sealed record.

An append moves the run's row on (``log_end``, under its lock, with the
claim's epoch checked) and inserts the records, in one transaction. An owner
that knows the log's end (``_owned.py``) does both in one statement
(``_statements.py``), which also carries the snapshots and chunks waiting
for it (``_waiting.py``); it is sent from the event loop's thread on an idle
connection (``_direct.py``) when one is free, else from a worker thread. Any
other append takes two round trips, and finds the log's end under the row's
lock. Truncation deletes rows; positions stay absolute (``log_start``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import psycopg

from actorflow._log import get_logger
from actorflow.errors import LogPrunedError, RunNotFoundError
from actorflow.storage._records import validate_run_id
from actorflow.storage.postgres import _direct as direct
from actorflow.storage.postgres._direct import DIRECT_BYTES, UNKNOWN, Unknown
from actorflow.storage.postgres._statements import append_statement

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._records import LogRecord
    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database
    from actorflow.storage.postgres._owned import OwnedRuns
    from actorflow.storage.postgres._waiting import WaitingRows

__all__ = ["LogRows"]

_log = get_logger(__name__)


class LogRows:
    """The ``af_log`` table, and each run's bounds in ``af_runs``.

    Args:
        db: the store's connections.
        codec: seals and opens the records.
        owned: the runs this store owns (their epochs and logs' ends).
        waiting: rows waiting for an append (written before a truncation).
        where: names a run's part in errors (``where(run_id, "log", position)``).
    """

    def __init__(
        self,
        db: Database,
        codec: Codec,
        owned: OwnedRuns,
        waiting: WaitingRows,
        where: Callable[..., str],
    ) -> None:
        self._db = db
        self.codec = codec
        self._owned = owned
        self._waiting = waiting
        self._where = where

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append ``records`` (see :meth:`PostgresStore.append`); the new length."""
        validate_run_id(run_id)
        if not records:
            return await self.length(run_id)
        batch = uuid.uuid4()
        count = len(records)

        def slow(conn: Connection, retried: bool) -> int:
            # two round trips: BEGIN and the row's update (its lock, the log's end, the
            # claim's epoch) in one; the records and COMMIT in the other
            with conn.pipeline(), conn.transaction():
                if retried:
                    landed = conn.execute(
                        "SELECT position FROM af_log WHERE run_id = %s AND batch = %s",
                        (run_id, batch),
                    ).fetchone()
                    if landed is not None:
                        return int(landed[0]) + count
                row = conn.execute(
                    "UPDATE af_runs SET log_end = log_end + %s WHERE run_id = %s "
                    "RETURNING log_end, epoch",
                    (count, run_id),
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                self._owned.fence(run_id, int(row[1]))
                start = int(row[0]) - count
                dump = self.codec.dump_record
                rows = [
                    (
                        run_id,
                        start + i,
                        batch if i == 0 else None,
                        dump(r, run_id=run_id, position=start + i),
                    )
                    for i, r in enumerate(records)
                ]
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO af_log (run_id, position, batch, data) "
                        "VALUES (%s, %s, %s, %s)",
                        rows,
                    )
                return start + count

        unknown = False  # a try from this thread lost its connection: did it land?
        lease = self._owned.leases.get(run_id)
        start = self._owned.log_end.get(run_id)
        if lease is not None and start is not None:
            lock = self._owned.appending(run_id)
            if lock.acquire(blocking=False):  # else a worker thread appends: queue behind it
                try:
                    done = await self._append_direct(run_id, records, batch, start, lease.epoch)
                finally:
                    lock.release()
                if isinstance(done, int):
                    return done
                unknown = done is UNKNOWN

        def append(conn: Connection, retried: bool) -> int:
            retried = retried or unknown
            with self._owned.appending(run_id):
                lease = self._owned.leases.get(run_id)
                start = self._owned.log_end.get(run_id)
                if lease is not None and start is not None and not retried:
                    end = self._append_fast(conn, run_id, records, batch, start, lease.epoch)
                    if end is not None:
                        self._owned.log_end[run_id] = end
                        return end
                self._owned.log_end.pop(run_id, None)
                end = slow(conn, retried)
                if lease is not None:
                    self._owned.log_end[run_id] = end
                return end

        end: int = await self._db.run("append", append)
        return end

    async def _append_direct(
        self,
        run_id: str,
        records: Sequence[LogRecord],
        batch: uuid.UUID,
        start: int,
        epoch: int,
    ) -> int | Unknown | None:
        """:meth:`_append_fast` from the event loop's thread, on an idle connection.

        The new end; ``None`` if nothing was written (no idle connection, a
        large batch, or the end or epoch is not what this store knew); ``UNKNOWN``
        if the connection was lost before the answer came.
        """
        dump = self.codec.dump_record
        sealed = [dump(r, run_id=run_id, position=start + i) for i, r in enumerate(records)]
        if sum(map(len, sealed)) > DIRECT_BYTES:
            return None
        conn = self._db.borrow_idle()
        if conn is None:
            return None
        waiting = self._owned.deferred.take(run_id)
        if waiting is not None and waiting.epoch != epoch:  # an earlier claim's: the flusher's
            self._owned.deferred.give_back(run_id, waiting)
            waiting = None
        st = append_statement(run_id, sealed, batch, start, epoch, waiting)
        try:
            result = await direct.execute(conn.pgconn, st.text, st.params, st.types)
        except psycopg.Error as exc:
            lost = conn.broken or conn.closed
            self._db.give_back(conn)
            if waiting is not None:
                self._owned.deferred.give_back(run_id, waiting)  # written again: same rows, no harm
            if lost:
                _log.warning("postgres_connection_lost", operation="append", error=str(exc))
                return UNKNOWN
            return None  # refused: the worker thread's try says why
        self._db.give_back(conn)
        count = len(sealed)
        if result.ntuples != count:
            if waiting is not None:
                self._owned.deferred.give_back(run_id, waiting)
            return None
        self._owned.log_end[run_id] = start + count
        await self._waiting.carried(run_id, waiting, int(result.get_value(0, 0) or 0))
        return start + count

    def _append_fast(
        self,
        conn: Connection,
        run_id: str,
        records: Sequence[LogRecord],
        batch: uuid.UUID,
        start: int,
        epoch: int,
    ) -> int | None:
        """One statement (and its commit): the append of an owner that knows the log's end.

        ``None`` if the end or the epoch is not what this store knew (nothing written).
        """
        count = len(records)
        dump = self.codec.dump_record
        sealed = [dump(r, run_id=run_id, position=start + i) for i, r in enumerate(records)]
        rows = conn.execute(
            "WITH r AS (UPDATE af_runs SET log_end = log_end + %s "
            "WHERE run_id = %s AND log_end = %s AND epoch = %s RETURNING 1) "
            "INSERT INTO af_log (run_id, position, batch, data) "
            "SELECT %s, p, b, d FROM r, "
            "unnest(%s::bigint[], %s::uuid[], %s::bytea[]) AS t(p, b, d) RETURNING 1",
            (
                count,
                run_id,
                start,
                epoch,
                run_id,
                list(range(start, start + count)),
                [batch, *([None] * (count - 1))],
                sealed,
            ),
        ).fetchall()
        return start + count if len(rows) == count else None

    async def read(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """The run's records from ``start``, decoded."""
        validate_run_id(run_id)

        def read(conn: Connection, retried: bool) -> list[LogRecord]:
            with conn.transaction():
                row = conn.execute(
                    "SELECT log_start FROM af_runs WHERE run_id = %s", (run_id,)
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                if start < int(row[0]):
                    raise LogPrunedError(run_id, int(row[0]), start)
                rows = conn.execute(
                    "SELECT position, data FROM af_log WHERE run_id = %s AND position >= %s "
                    "ORDER BY position",
                    (run_id, start),
                ).fetchall()
            load = self.codec.load_record
            return [
                load(bytes(d), run_id=run_id, position=p, location=self._where(run_id, "log", p))
                for p, d in rows
            ]

        records: list[LogRecord] = await self._db.run("read log", read)
        return records

    async def length(self, run_id: str) -> int:
        """The run's log end."""
        validate_run_id(run_id)

        def length(conn: Connection, retried: bool) -> int:
            row = conn.execute(
                "SELECT log_end FROM af_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            return int(row[0])

        n: int = await self._db.run("log length", length)
        return n

    async def truncate_before(self, run_id: str, position: int) -> int:
        """Delete the records before ``position``: how many went."""
        validate_run_id(run_id)
        await self._waiting.settle(run_id)

        def truncate(conn: Connection, retried: bool) -> int:
            with conn.transaction():
                row = conn.execute(
                    "SELECT log_start, log_end FROM af_runs WHERE run_id = %s FOR UPDATE",
                    (run_id,),
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                first, end = int(row[0]), int(row[1])
                new = max(first, min(position, end))
                if new > first:
                    conn.execute(
                        "DELETE FROM af_log WHERE run_id = %s AND position < %s", (run_id, new)
                    )
                    conn.execute(
                        "UPDATE af_runs SET log_start = %s WHERE run_id = %s", (new, run_id)
                    )
                return new - first

        dropped: int = await self._db.run("truncate log", truncate)
        return dropped
