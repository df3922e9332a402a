"""What a SqliteStore's workers share besides runs: schedules and rate budgets.

``schedules`` holds each schedule's sealed definition (written durably:
the user declared it) and its progress (not synced: a power loss that takes
it costs a worker one ``create_run`` that finds the tick's run). ``limits``
holds each limit key's sliding minute, read, decided and written in one
transaction, so every process using the file takes from one budget; not
synced, since a budget is about the last minute.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import CorruptedDataError, EncryptionKeyError, ScheduleNotFoundError
from actorflow.storage._schedules import (
    SkippedSchedules,
    dump_progress,
    dump_schedule,
    load_progress,
    load_schedule,
    validate_schedule_id,
)
from actorflow.storage._windows import take_window

if TYPE_CHECKING:
    import sqlite3

    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._schedules import Schedule, ScheduleProgress
    from actorflow.storage._sealing import Codec

__all__ = ["LimitRows", "ScheduleRows"]

_log = get_logger("actorflow.storage")

# module-level: in the class, `list` names its method
_Found: TypeAlias = "list[Schedule]"
_Damaged: TypeAlias = "list[UnreadableEntry]"


class ScheduleRows:
    """The ``schedules`` table."""

    def __init__(self, codec: Codec, location: str) -> None:
        self.codec = codec
        self.location = location
        self._skipped = SkippedSchedules()

    def where(self, schedule_id: str, part: str = "definition") -> str:
        """A schedule's row, as errors name it."""
        return f"{self.location}: schedules row ({schedule_id!r}, {part})"

    def put(self, conn: sqlite3.Connection, schedule: Schedule) -> None:
        """Store the definition, keeping the progress."""
        schedule_id = validate_schedule_id(schedule.schedule_id)
        conn.execute(
            "INSERT INTO schedules (schedule_id, definition) VALUES (?, ?) "
            "ON CONFLICT (schedule_id) DO UPDATE SET definition = excluded.definition",
            (schedule_id, dump_schedule(self.codec, schedule)),
        )

    def read(self, conn: sqlite3.Connection, schedule_id: str) -> Schedule:
        """The definition.

        Raises:
            ScheduleNotFoundError: none.
        """
        found = conn.execute(
            "SELECT definition FROM schedules WHERE schedule_id = ?", (schedule_id,)
        ).fetchone()
        if found is None:
            raise ScheduleNotFoundError(schedule_id)
        return load_schedule(
            self.codec, found[0], schedule_id=schedule_id, location=self.where(schedule_id)
        )

    def list(self, conn: sqlite3.Connection) -> list[Schedule]:
        """Every definition that can be read, by id."""
        return self._scan(conn)[0]

    def damaged(self, conn: sqlite3.Connection) -> _Damaged:
        """The definitions that are damaged (what :meth:`list` skips, sealed ones aside)."""
        return self._scan(conn)[1]

    def _scan(self, conn: sqlite3.Connection) -> tuple[_Found, _Damaged]:
        found: _Found = []
        damaged: _Damaged = []
        for schedule_id, data in conn.execute(
            "SELECT schedule_id, definition FROM schedules ORDER BY schedule_id"
        ):
            try:
                found.append(
                    load_schedule(
                        self.codec, data, schedule_id=schedule_id, location=self.where(schedule_id)
                    )
                )
            except (CorruptedDataError, EncryptionKeyError) as exc:
                entry = self._skipped.skip(schedule_id, exc)
                damaged += [entry] if entry else []
            else:
                self._skipped.read(schedule_id)
        return found, damaged

    @staticmethod
    def delete(conn: sqlite3.Connection, schedule_id: str) -> None:
        """Remove the definition and its progress.

        Raises:
            ScheduleNotFoundError: none.
        """
        gone = conn.execute("DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,))
        if gone.rowcount == 0:
            raise ScheduleNotFoundError(schedule_id)

    def put_progress(self, conn: sqlite3.Connection, progress: ScheduleProgress) -> None:
        """Store the progress of a schedule (a progress without a definition is dropped)."""
        conn.execute(
            "UPDATE schedules SET progress = ? WHERE schedule_id = ?",
            (dump_progress(self.codec, progress), validate_schedule_id(progress.schedule_id)),
        )

    def read_progress(self, conn: sqlite3.Connection, schedule_id: str) -> ScheduleProgress | None:
        """The progress, or ``None`` if there is none or it cannot be read."""
        found = conn.execute(
            "SELECT progress FROM schedules WHERE schedule_id = ?", (schedule_id,)
        ).fetchone()
        if found is None or found[0] is None:
            return None
        where = self.where(schedule_id, "progress")
        try:
            return load_progress(self.codec, found[0], schedule_id=schedule_id, location=where)
        except (CorruptedDataError, EncryptionKeyError) as exc:
            # only a hint: without it a worker looks from the schedule's anchor
            _log.warning(
                "schedule_progress_unreadable", schedule_id=schedule_id, error=describe(exc)
            )
            return None


class _Window(msgspec.Struct, array_like=True):
    starts: list[float] = []
    tokens: list[tuple[float, float]] = []


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_Window).decode


class LimitRows:
    """The ``limits`` table: one sliding minute per key."""

    @staticmethod
    def _read(conn: sqlite3.Connection, key: str) -> _Window:
        found = conn.execute("SELECT window FROM limits WHERE key = ?", (key,)).fetchone()
        if found is None:
            return _Window()
        try:
            return _decode(found[0])
        except msgspec.DecodeError:
            return _Window()  # damaged: the budget starts afresh

    @staticmethod
    def _write(conn: sqlite3.Connection, key: str, window: _Window) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO limits (key, window) VALUES (?, ?)", (key, _encode(window))
        )

    def take(
        self,
        conn: sqlite3.Connection,
        key: str,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """Take one request from ``key``'s window at ``now``: 0.0, or seconds to wait."""
        window = self._read(conn, key)
        starts = collections.deque(window.starts)
        tokens = collections.deque(window.tokens)
        before = len(starts), len(tokens)
        wait, _ = take_window(
            starts,
            tokens,
            sum(n for _, n in tokens),
            per_minute=per_minute,
            tokens_per_minute=tokens_per_minute,
            now=now,
        )
        if (len(starts), len(tokens)) != before or wait <= 0:
            self._write(conn, key, _Window(list(starts), list(tokens)))
        return wait

    def spend(self, conn: sqlite3.Connection, key: str, tokens: float, now: float) -> None:
        """Count ``tokens`` spent at ``now`` in ``key``'s window."""
        window = self._read(conn, key)
        window.tokens.append((now, tokens))
        self._write(conn, key, window)
