"""A PostgresStore's run inboxes: ``af_inbox``, one row per entry, (run, entry id) unique.

A post takes the next ``seq`` from the run's row (``inbox_end``) under its
lock and commits the entry with a ``pg_notify`` that wakes the watches of
the run in every process (``_notify.py``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from actorflow.errors import RunNotFoundError
from actorflow.storage._inbox import InboxEntry, id_key, open_entry, seal_entry
from actorflow.storage._inbox_check import InboxCheck, open_or_skip
from actorflow.storage._records import validate_run_id
from actorflow.storage.postgres._notify import INBOX

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database

__all__ = ["InboxRows", "require_run"]


class _Posted(Exception):
    """The entry id was posted before: the transaction rolls back, the first entry stands."""


def require_run(conn: Connection, run_id: str) -> None:
    """Raise ``RunNotFoundError`` if ``run_id`` has no row."""
    if conn.execute("SELECT 1 FROM af_runs WHERE run_id = %s", (run_id,)).fetchone() is None:
        raise RunNotFoundError(run_id)


class InboxRows:
    """The ``af_inbox`` table.

    Args:
        db: the store's connections.
        codec: seals and opens the entries.
        where: names a run's part in errors (``where(run_id, "inbox", seq)``).
        channel: the store's NOTIFY channel.
    """

    def __init__(self, db: Database, codec: Codec, where: Callable[..., str], channel: str) -> None:
        self._db = db
        self.codec = codec
        self._where = where
        self._channel = channel
        self._warned: dict[str, set[int]] = {}

    def forget(self, run_id: str) -> None:
        """Drop what is remembered of a deleted run (its damaged entries warned of)."""
        self._warned.pop(run_id, None)

    async def post(
        self,
        run_id: str,
        *,
        entry_id: str,
        type: str,
        payload: bytes,
        sender: str | None = None,
        kind: str = "",
    ) -> InboxEntry:
        """Post an entry (:meth:`SupportsInbox.post`): one transaction; its commit notifies.

        A repeated ``entry_id`` (also from another process) returns the entry
        stored first: the pair (run, entry id) is unique.
        """
        validate_run_id(run_id)
        named = id_key(self.codec, entry_id)  # ids may hold anything, NUL included

        def existing(conn: Connection) -> InboxEntry | None:
            found = conn.execute(
                "SELECT seq, data FROM af_inbox WHERE run_id = %s AND entry_id = %s",
                (run_id, named),
            ).fetchone()
            if found is None:
                return None
            seq = int(found[0])
            where = self._where(run_id, "inbox", seq)
            return open_entry(self.codec, bytes(found[1]), run_id=run_id, seq=seq, location=where)

        def post(conn: Connection, retried: bool) -> InboxEntry:
            # three round trips: the row's lock and the next seq; the entry (and the
            # NOTIFY its commit sends); the commit. An id posted before rolls it all back.
            with conn.pipeline():
                try:
                    with conn.transaction():
                        row = conn.execute(
                            "UPDATE af_runs SET inbox_end = inbox_end + 1 WHERE run_id = %s "
                            "RETURNING inbox_end - 1",
                            (run_id,),
                        ).fetchone()
                        if row is None:
                            raise RunNotFoundError(run_id)
                        entry = InboxEntry(
                            seq=int(row[0]),
                            entry_id=entry_id,
                            type=type,
                            payload=payload,
                            sent=time.time(),
                            sender=sender,
                            kind=kind,
                        )
                        sealed = seal_entry(self.codec, entry, run_id=run_id)
                        inserted = conn.execute(
                            "INSERT INTO af_inbox (run_id, seq, entry_id, data) "
                            "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id, entry_id) DO NOTHING "
                            "RETURNING 1",
                            (run_id, entry.seq, named, sealed),
                        )
                        conn.execute(
                            "SELECT pg_notify(%s, %s)", (self._channel, f"{INBOX}:{run_id}")
                        )
                        if inserted.fetchone() is None:
                            raise _Posted
                        return entry
                except _Posted:
                    pass
                found = existing(conn)
            assert found is not None
            return found

        entry: InboxEntry = await self._db.run("post", post)
        return entry

    async def read(self, run_id: str, start: int = 0, stop: int | None = None) -> list[InboxEntry]:
        """Entries ``start`` to ``stop`` (:meth:`SupportsInbox.read_inbox`): one query; a
        damaged entry is skipped, with one warning."""
        validate_run_id(run_id)
        warned = self._warned.setdefault(run_id, set())

        def read(conn: Connection, retried: bool) -> list[InboxEntry]:
            rows = conn.execute(
                "SELECT seq, data FROM af_inbox WHERE run_id = %s AND seq >= %s "
                "AND (%s::bigint IS NULL OR seq < %s) ORDER BY seq",
                (run_id, max(start, 0), stop, stop),
            ).fetchall()
            if not rows:
                require_run(conn, run_id)
            entries = []
            for seq, data in rows:
                entry = open_or_skip(
                    self.codec,
                    bytes(data),
                    run_id=run_id,
                    seq=int(seq),
                    location=self._where(run_id, "inbox", seq),
                    warned=warned,
                )
                if entry is not None:
                    entries.append(entry)
            return entries

        entries: list[InboxEntry] = await self._db.run("read inbox", read)
        return entries

    async def check(self, run_id: str) -> InboxCheck:
        """Every entry opened, the damaged ones named (:meth:`InboxChecker.check_inbox`)."""
        validate_run_id(run_id)

        def check(conn: Connection, retried: bool) -> InboxCheck:
            require_run(conn, run_id)
            result = InboxCheck()
            rows = conn.execute(
                "SELECT seq, data FROM af_inbox WHERE run_id = %s ORDER BY seq", (run_id,)
            )
            for seq, data in rows:
                where = self._where(run_id, "inbox", seq)
                result.open(self.codec, bytes(data), run_id=run_id, seq=int(seq), location=where)
            return result

        result: InboxCheck = await self._db.run("check inbox", check)
        return result
