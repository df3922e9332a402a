"""A SqliteStore's decision log: one row per record, appended in group commits.

``log`` holds ``(run_id, position, record)``, the record sealed and bound to
its position (a table without rowids: an append changes one B-tree, so a
commit writes few pages); the log ends after its last row, and starts at
``runs.log_start`` (moved by retention's cuts).
An append is one write of the store's group commit (:mod:`._db`): it takes
the positions after the last row inside the transaction, so appends of
several processes (or tools) never share a position, and a commit is
whole or absent: there is no torn tail to cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.errors import (
    CorruptedDataError,
    LogCorruptedError,
    LogPrunedError,
    NewerFormatError,
    RunNotFoundError,
)
from actorflow.storage._envelope import Kind
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from actorflow.storage._records import LogRecord
    from actorflow.storage._sealing import Codec

__all__ = ["LogRows"]


class LogRows:
    """The log rows of every run in one file."""

    def __init__(self, codec: Codec, location: str) -> None:
        self.codec = codec
        self.location = location

    def where(self, run_id: str, position: int) -> str:
        """A record's row, as errors name it."""
        return row(self.location, "log", run_id, "position", position)

    @staticmethod
    def bounds(conn: sqlite3.Connection, run_id: str) -> tuple[int, int]:
        """``(first kept position, end)`` of the run's log.

        Raises:
            RunNotFoundError: no such run.
        """
        found = conn.execute(
            "SELECT log_start, (SELECT MAX(position) FROM log WHERE run_id = ?) "
            "FROM runs WHERE run_id = ?",
            (run_id, run_id),
        ).fetchone()
        if found is None:
            raise RunNotFoundError(run_id)
        start = int(found[0])
        return start, start if found[1] is None else max(start, int(found[1]) + 1)

    def append(self, conn: sqlite3.Connection, run_id: str, raws: Sequence[bytes]) -> int:
        """Seal and insert the encoded records after the log's end; the new end."""
        _, end = self.bounds(conn, run_id)
        if not raws:
            return end
        seal = self.codec.seal
        conn.executemany(
            "INSERT INTO log (run_id, position, record) VALUES (?, ?, ?)",
            [
                (
                    run_id,
                    end + i,
                    seal(raw, kind=Kind.LOG_RECORD, run_id=run_id, slot=f"log/{end + i}"),
                )
                for i, raw in enumerate(raws)
            ],
        )
        return end + len(raws)

    def read(self, conn: sqlite3.Connection, run_id: str, start: int) -> list[LogRecord]:
        """Records from ``start`` to the end.

        Raises:
            LogPrunedError: ``start`` is below what retention kept.
            LogCorruptedError: a record fails its checksum or does not decode,
                or a row is missing; naming the row.
        """
        first, end = self.bounds(conn, run_id)
        if start < first:
            raise LogPrunedError(run_id, first, start)
        records: list[LogRecord] = []
        expected = start
        for position, data in conn.execute(
            "SELECT position, record FROM log WHERE run_id = ? AND position >= ? "
            "AND position < ? ORDER BY position",
            (run_id, start, end),
        ):
            if position != expected:
                raise LogCorruptedError(self.where(run_id, expected), "the row is missing")
            records.append(self.load(run_id, position, data))
            expected += 1
        if expected < end:
            raise LogCorruptedError(self.where(run_id, expected), "the row is missing")
        return records

    def load(self, run_id: str, position: int, data: bytes) -> LogRecord:
        """Open one stored record."""
        record = self.codec.load_plain_record(data)
        if record is not None:
            return record
        location = self.where(run_id, position)
        try:
            return self.codec.load_record(data, run_id=run_id, position=position, location=location)
        except (LogCorruptedError, NewerFormatError):
            raise
        except CorruptedDataError as exc:
            raise LogCorruptedError(location, exc.cause_text) from exc

    def truncate_before(self, conn: sqlite3.Connection, run_id: str, position: int) -> int:
        """Delete the records below ``position``; how many went."""
        first, end = self.bounds(conn, run_id)
        cut = max(first, min(position, end))
        if cut == first:
            return 0
        conn.execute("DELETE FROM log WHERE run_id = ? AND position < ?", (run_id, cut))
        conn.execute("UPDATE runs SET log_start = ? WHERE run_id = ?", (cut, run_id))
        return cut - first
