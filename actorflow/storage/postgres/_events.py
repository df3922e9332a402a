"""A PostgresStore's event streams: each run's newest batches in ``af_events``.

A batch is a row: its first position, event count, whether it ends its
writer's stream, and the sealed batch (prefix included, as the file store
writes it). The writer (the runtime's background thread) inserts one row per
batch on a pooled connection, without waiting for a sync
(``synchronous_commit = off``: the stream is not durable), and every eighth
of the bound it deletes the oldest rows past the bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.storage._event_stream import EventSlice, StreamedEvent, open_batch, seal_batch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database

__all__ = ["EventRows", "RowWriter"]


class EventRows:
    """The event streams of a PostgresStore's runs.

    Args:
        db: the store's connections.
        codec: seals and opens batches.
        keep_bytes: sealed bytes of a run's stream kept at most (the newest
            batch is kept whatever its size).
        place: where the store is, for messages.
    """

    def __init__(self, db: Database, codec: Codec, keep_bytes: int, place: str) -> None:
        self._db = db
        self._codec = codec
        self.keep_bytes = keep_bytes
        self._place = place

    def writer(self, run_id: str) -> RowWriter:
        """A writer for one attempt of the run."""
        return RowWriter(self, run_id)

    def write(
        self, run_id: str, events: Sequence[bytes], *, lost: int, end: bool, next_at: int | None
    ) -> int:
        """Insert one batch (blocking); return the position after it."""
        codec = self._codec

        def insert(conn: Connection, retried: bool) -> int:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                start = next_at
                if start is None:
                    row = conn.execute(
                        "SELECT first + count FROM af_events WHERE run_id = %s "
                        "ORDER BY id DESC LIMIT 1",
                        (run_id,),
                    ).fetchone()
                    start = int(row[0]) if row is not None else 0
                first = start + lost
                if (
                    retried
                    and conn.execute(
                        "SELECT 1 FROM af_events WHERE run_id = %s AND first = %s AND count = %s",
                        (run_id, first, len(events)),
                    ).fetchone()
                ):
                    return first + len(events)
                sealed = seal_batch(codec, events, run_id=run_id, first=first, end=end)
                conn.execute(
                    "INSERT INTO af_events (run_id, first, count, ended, data) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (run_id, first, len(events), end, sealed),
                )
                return first + len(events)

        return self._db.call("stream events", insert)

    def trim(self, run_id: str) -> None:
        """Delete the run's oldest batches past the bound (blocking)."""

        def cut(conn: Connection, retried: bool) -> None:
            rows = conn.execute(
                "SELECT id, octet_length(data) FROM af_events WHERE run_id = %s ORDER BY id DESC",
                (run_id,),
            ).fetchall()
            total = 0
            for i, (row_id, size) in enumerate(rows):
                total += int(size)
                if total > self.keep_bytes and i > 0:
                    conn.execute(
                        "DELETE FROM af_events WHERE run_id = %s AND id <= %s", (run_id, row_id)
                    )
                    return

        self._db.call("trim events", cut)

    def read(self, conn: Connection, run_id: str, start: int, limit: int) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events` (in a worker thread)."""
        last = conn.execute(
            "SELECT ended FROM af_events WHERE run_id = %s ORDER BY id DESC LIMIT 1", (run_id,)
        ).fetchone()
        if last is None:
            return EventSlice(events=[], next=start, ended=True)
        rows = conn.execute(
            "SELECT first, count, data FROM af_events WHERE run_id = %s "
            "AND (first + count > %s OR first >= %s) ORDER BY id",
            (run_id, start, start),
        ).fetchall()
        events: list[StreamedEvent] = []
        position = start
        where = f"{self._place}#runs/{run_id}/events"
        for first, count, data in rows:
            if count:
                batch = open_batch(self._codec, bytes(data), run_id=run_id, location=where)
                fresh = [e for e in batch.events if e.position >= position]
                room = limit - len(events)
                if len(fresh) > room:
                    events.extend(fresh[:room])
                    if room:
                        position = fresh[room - 1].position + 1
                    return EventSlice(events=events, next=position)
                events.extend(fresh)
            position = max(position, int(first) + int(count))
        return EventSlice(events=events, next=position, ended=bool(last[0]))


class RowWriter:
    """One attempt's writer; see :class:`~actorflow.storage.EventStreamWriter`."""

    def __init__(self, rows: EventRows, run_id: str) -> None:
        self._rows = rows
        self._run_id = run_id
        self._next: int | None = None
        self._written = 0

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        """See :meth:`EventStreamWriter.write`."""
        rows = self._rows
        size = sum(map(len, events))
        self._next = rows.write(self._run_id, events, lost=lost, end=end, next_at=self._next)
        self._written += size
        if self._written > rows.keep_bytes // 8:
            self._written = 0
            rows.trim(self._run_id)

    def close(self) -> None:
        """See :meth:`EventStreamWriter.close`: nothing to release."""
