"""What a PostgresStore's workers share besides runs: rate budgets and schedules.

``af_limits`` holds each limit key's sliding minute, taken under the row's
lock in one transaction (committed without a WAL flush: a budget is about the
last minute); ``af_schedules`` and ``af_schedule_progress`` hold each
schedule's sealed definition and its progress.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, TypeAlias

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
    from psycopg import Connection

    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._schedules import Schedule, ScheduleProgress
    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Database

__all__ = ["LimitRows", "ScheduleRows"]

_log = get_logger("actorflow.storage")

_encode = msgspec.msgpack.Encoder().encode
_decode_window = msgspec.msgpack.Decoder(
    tuple[list[float], list[tuple[float, float]], float]
).decode

# module-level: in the class, `list` names its method
_Found: TypeAlias = "list[Schedule]"
_Damaged: TypeAlias = "list[UnreadableEntry]"


class LimitRows:
    """``af_limits``: one window per limit key, shared exactly by every process."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def take(
        self,
        key: str,
        *,
        per_minute: int | None,
        tokens_per_minute: int | None,
        now: float,
    ) -> float:
        """Take from ``key``'s window under its row lock: every process shares it, exactly.

        See :meth:`SharedLimits.take_limit`.
        """

        def take(conn: Connection, retried: bool) -> float:
            with conn.transaction():
                starts, spends, total = self._window(conn, key)
                wait, total = take_window(
                    starts,
                    spends,
                    total,
                    per_minute=per_minute,
                    tokens_per_minute=tokens_per_minute,
                    now=now,
                )
                if wait <= 0:
                    self._save_window(conn, key, starts, spends, total)
                return wait

        wait: float = await self._db.run("take limit", take)
        return wait

    async def spend(self, key: str, tokens: float, *, now: float) -> None:
        """Count ``tokens`` spent at ``now`` in ``key``'s window.

        See :meth:`SharedLimits.spend_limit_tokens`.
        """

        def spend(conn: Connection, retried: bool) -> None:
            with conn.transaction():
                starts, spends, total = self._window(conn, key)
                spends.append((now, tokens))
                self._save_window(conn, key, starts, spends, total + tokens)

        await self._db.run("spend limit tokens", spend)

    def _window(self, conn: Connection, key: str) -> tuple[Any, Any, float]:
        conn.execute("SET LOCAL synchronous_commit = off")  # a budget, not a record
        conn.execute(
            "INSERT INTO af_limits (key, starts) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (key, _encode(([], [], 0.0))),
        )
        row = conn.execute(
            "SELECT starts FROM af_limits WHERE key = %s FOR UPDATE", (key,)
        ).fetchone()
        assert row is not None
        starts, spends, total = _decode_window(bytes(row[0]))
        return collections.deque(starts), collections.deque(spends), total

    def _save_window(
        self, conn: Connection, key: str, starts: Any, spends: Any, total: float
    ) -> None:
        conn.execute(
            "UPDATE af_limits SET starts = %s WHERE key = %s",
            (_encode((list(starts), list(spends), total)), key),
        )


class ScheduleRows:
    """``af_schedules`` and ``af_schedule_progress``."""

    def __init__(self, db: Database, codec: Codec, place: str) -> None:
        self._db = db
        self.codec = codec
        self._place = place
        self._skipped = SkippedSchedules()

    async def put(self, schedule: Schedule) -> None:
        """Store the definition (:meth:`ScheduleStore.put_schedule`)."""
        schedule_id = validate_schedule_id(schedule.schedule_id)
        data = dump_schedule(self.codec, schedule)
        await self._db.run(
            "put schedule",
            lambda conn, _: conn.execute(
                "INSERT INTO af_schedules (schedule_id, data) VALUES (%s, %s) "
                "ON CONFLICT (schedule_id) DO UPDATE SET data = EXCLUDED.data",
                (schedule_id, data),
            ),
        )

    async def read(self, schedule_id: str) -> Schedule:
        """The definition (:meth:`ScheduleStore.read_schedule`)."""

        def read(conn: Connection, retried: bool) -> bytes | None:
            row = conn.execute(
                "SELECT data FROM af_schedules WHERE schedule_id = %s", (schedule_id,)
            ).fetchone()
            return None if row is None else bytes(row[0])

        data = await self._db.run("read schedule", read)
        if data is None:
            raise ScheduleNotFoundError(schedule_id)
        where = f"{self._place}#schedules/{schedule_id}"
        return load_schedule(self.codec, data, schedule_id=schedule_id, location=where)

    async def list(self) -> _Found:
        """The definitions that can be read (:meth:`ScheduleStore.list_schedules`)."""
        return (await self.scan())[0]

    async def scan(self) -> tuple[_Found, _Damaged]:
        """The definitions that can be read, and the damaged ones (sealed ones are neither)."""
        rows = await self._db.run(
            "list schedules",
            lambda conn, _: conn.execute(
                "SELECT schedule_id, data FROM af_schedules ORDER BY schedule_id"
            ).fetchall(),
        )
        found: _Found = []
        damaged: _Damaged = []
        for schedule_id, data in rows:
            where = f"{self._place}#schedules/{schedule_id}"
            try:
                found.append(
                    load_schedule(self.codec, bytes(data), schedule_id=schedule_id, location=where)
                )
            except (CorruptedDataError, EncryptionKeyError) as exc:
                entry = self._skipped.skip(schedule_id, exc)
                damaged += [entry] if entry else []
            else:
                self._skipped.read(schedule_id)
        return found, damaged

    async def delete(self, schedule_id: str) -> None:
        """Remove the definition and its progress (:meth:`ScheduleStore.delete_schedule`)."""

        def delete(conn: Connection, retried: bool) -> bool:
            with conn.transaction():
                gone = conn.execute(
                    "DELETE FROM af_schedules WHERE schedule_id = %s RETURNING 1", (schedule_id,)
                ).fetchone()
                conn.execute(
                    "DELETE FROM af_schedule_progress WHERE schedule_id = %s", (schedule_id,)
                )
            return gone is not None or retried

        if not await self._db.run("delete schedule", delete):
            raise ScheduleNotFoundError(schedule_id)

    async def put_progress(self, progress: ScheduleProgress) -> None:
        """Store the progress (:meth:`ScheduleStore.put_schedule_progress`)."""
        data = dump_progress(self.codec, progress)
        await self._db.run(
            "put schedule progress",
            lambda conn, _: conn.execute(
                "INSERT INTO af_schedule_progress (schedule_id, data) VALUES (%s, %s) "
                "ON CONFLICT (schedule_id) DO UPDATE SET data = EXCLUDED.data",
                (progress.schedule_id, data),
            ),
        )

    async def read_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """The progress; None if there is none or it cannot be read.

        See :meth:`ScheduleStore.read_schedule_progress`.
        """

        def read(conn: Connection, retried: bool) -> bytes | None:
            row = conn.execute(
                "SELECT data FROM af_schedule_progress WHERE schedule_id = %s", (schedule_id,)
            ).fetchone()
            return None if row is None else bytes(row[0])

        data = await self._db.run("read schedule progress", read)
        if data is None:
            return None
        where = f"{self._place}#schedules/{schedule_id}.progress"
        try:
            return load_progress(self.codec, data, schedule_id=schedule_id, location=where)
        except (CorruptedDataError, EncryptionKeyError) as exc:
            _log.warning(
                "schedule_progress_unreadable", schedule_id=schedule_id, error=describe(exc)
            )
            return None
