"""A SqliteStore's event streams: rows of the ``events`` table, one batch each, never synced.

Each batch is a row ``(run_id, first, count, ended, batch)``, the batch
sealed as every store seals it (:func:`~actorflow.storage._event_stream.seal_batch`),
written by the run's owner from its background thread in a commit of its
own without a sync. Past ``keep_bytes`` of a run's batches the oldest rows
are deleted in the same commit (the newest always stays).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from actorflow.storage._event_stream import EventSlice, StreamedEvent, open_batch, seal_batch

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from actorflow.storage._sealing import Codec
    from actorflow.storage.sqlite._db import Database

__all__ = ["EventRows", "read_events"]


class EventRows:
    """One attempt's writer of a run's event stream (an ``EventStreamWriter``)."""

    def __init__(self, db: Database, codec: Codec, run_id: str, keep_bytes: int) -> None:
        self._db = db
        self._codec = codec
        self._run_id = run_id
        self._keep = keep_bytes
        self._next: int | None = None  # the position after the last event written
        self._kept: deque[tuple[int, int]] = (
            deque()
        )  # (first, size) of the run's rows, oldest first
        self._size = 0

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        """See :meth:`EventStreamWriter.write`: one commit, not synced. Blocks."""
        self._db.write_now(lambda conn: self._write(conn, events, lost, end), durable=False)

    def _write(
        self, conn: sqlite3.Connection, events: Sequence[bytes], lost: int, end: bool
    ) -> None:
        run_id = self._run_id
        if self._next is None:  # the first write of this attempt: what earlier ones left
            self._kept = deque(
                conn.execute(
                    "SELECT first, length(batch) FROM events WHERE run_id = ? ORDER BY first",
                    (run_id,),
                ).fetchall()
            )
            self._size = sum(size for _, size in self._kept)
            last = conn.execute(
                "SELECT MAX(first + count) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()
            self._next = last[0] or 0
        first = self._next + lost
        sealed = seal_batch(self._codec, events, run_id=run_id, first=first, end=end)
        conn.execute(
            "INSERT OR REPLACE INTO events (run_id, first, count, ended, batch) "
            "VALUES (?, ?, ?, ?, ?)",
            (run_id, first, len(events), int(end), sealed),
        )
        self._next = first + len(events)
        self._kept.append((first, len(sealed)))
        self._size += len(sealed)
        cut = None
        while len(self._kept) > 1 and self._size > self._keep:
            cut, size = self._kept.popleft()
            self._size -= size
        if cut is not None:
            conn.execute("DELETE FROM events WHERE run_id = ? AND first <= ?", (run_id, cut))

    def close(self) -> None:
        """See :meth:`EventStreamWriter.close`: nothing is held between writes."""


def read_events(
    conn: sqlite3.Connection, codec: Codec, location: str, run_id: str, start: int, limit: int
) -> EventSlice:
    """Up to ``limit`` events from ``start`` (see :meth:`SupportsEventStream.read_events`)."""
    rows = conn.execute(
        "SELECT first, count, ended, batch FROM events WHERE run_id = ? AND "
        "(first + count > ? OR first >= ?) ORDER BY first",
        (run_id, start, start),
    ).fetchall()
    if not rows:
        last = conn.execute(
            "SELECT ended FROM events WHERE run_id = ? ORDER BY first DESC LIMIT 1", (run_id,)
        ).fetchone()
        return EventSlice(events=[], next=start, ended=last is None or bool(last[0]))
    ended = bool(rows[-1][2])
    events: list[StreamedEvent] = []
    position = start
    where = f"{location}: events of run {run_id!r}"
    for first, count, _, sealed in rows:
        if count:
            batch = open_batch(codec, sealed, run_id=run_id, location=f"{where} from {first}")
            fresh = [e for e in batch.events if e.position >= position]
            room = limit - len(events)
            if len(fresh) > room:
                events.extend(fresh[:room])
                if room:
                    position = fresh[room - 1].position + 1
                return EventSlice(events=events, next=position)
            events.extend(fresh)
        position = max(position, first + count)
    return EventSlice(events=events, next=position, ended=ended)
