"""A SqliteStore's inboxes: one row per entry, posted in one transaction.

``inbox`` holds ``(run_id, seq, id_key, entry)``: the entry sealed and bound
to its run and ``seq``, and a hash of its id (:func:`~actorflow.storage._inbox.id_key`,
keyed when the store encrypts, so ids do not show). A post looks for its id
and takes the next ``seq`` inside one transaction, so a repeated id is exact
across every process using the file. Only a key rotation (which changes an
id's hash) can store one id twice; readers then see the first
(:class:`~actorflow.storage._inbox.FirstSeqs`), as in every store.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import msgspec

from actorflow.storage._inbox import FirstSeqs, id_key, open_entry, seal_entry
from actorflow.storage._inbox_check import InboxCheck, open_or_skip
from actorflow.storage._inbox_slots import new_entry
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3

    from actorflow.storage._inbox import InboxEntry
    from actorflow.storage._sealing import Codec
    from actorflow.storage.sqlite._runs import Manifests

__all__ = ["InboxRows"]


class InboxRows:
    """The inbox rows of every run in one file, and what this store read of each."""

    def __init__(self, codec: Codec, location: str, manifests: Manifests) -> None:
        self.codec = codec
        self.location = location
        self._manifests = manifests
        self._guard = threading.Lock()
        self._seen: dict[str, tuple[threading.Lock, FirstSeqs]] = {}

    def where(self, run_id: str, seq: int) -> str:
        """An entry's row, as errors name it."""
        return row(self.location, "inbox", run_id, "seq", seq)

    def forget(self, run_id: str) -> None:
        """Drop what this store remembers of the run's inbox (the run was deleted)."""
        with self._guard:
            self._seen.pop(run_id, None)

    def post(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        entry_id: str,
        type_name: str,
        payload: bytes,
        sender: str | None,
        kind: str,
    ) -> InboxEntry:
        """Insert the entry at the next ``seq``, unless its id is there (then return that one)."""
        self._manifests.require(conn, run_id)
        key = id_key(self.codec, entry_id)
        found = conn.execute(
            "SELECT seq, entry FROM inbox WHERE run_id = ? AND id_key = ?", (run_id, key)
        ).fetchone()
        if found is not None:
            seq = int(found[0])
            return open_entry(
                self.codec, found[1], run_id=run_id, seq=seq, location=self.where(run_id, seq)
            )
        end = conn.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM inbox WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
        entry = _with_seq(new_entry(entry_id, type_name, payload, sender, kind), int(end))
        conn.execute(
            "INSERT INTO inbox (run_id, seq, id_key, entry) VALUES (?, ?, ?, ?)",
            (run_id, entry.seq, key, seal_entry(self.codec, entry, run_id=run_id)),
        )
        return entry

    def read(
        self, conn: sqlite3.Connection, run_id: str, start: int, stop: int | None
    ) -> list[InboxEntry]:
        """Entries from ``start`` (before ``stop``), each id's first only; damaged ones skipped."""
        self._manifests.require(conn, run_id)
        start = max(start, 0)
        with self._guard:
            lock, firsts = self._seen.setdefault(run_id, (threading.Lock(), FirstSeqs()))
        with lock:
            # the ids before ``start``, read once per store, so duplicates there are known
            for seq, entry in self._entries(conn, run_id, firsts.end, start, firsts.damaged):
                firsts.note(seq, entry)
            entries = []
            for seq, entry in self._entries(conn, run_id, start, stop, firsts.damaged):
                firsts.note(seq, entry)
                if entry is not None:
                    entries.append(entry)
            return firsts.keep(entries)

    def _entries(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        start: int,
        stop: int | None,
        warned: set[int],
    ) -> list[tuple[int, InboxEntry | None]]:
        if stop is not None and stop <= start:
            return []
        rows = conn.execute(
            "SELECT seq, entry FROM inbox WHERE run_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
            (run_id, start, stop if stop is not None else 2**62),
        ).fetchall()
        found: list[tuple[int, InboxEntry | None]] = []
        for seq, data in rows:
            if seq != start + len(found):
                break  # entries have no gaps: one missing ends the inbox
            opened = open_or_skip(
                self.codec,
                data,
                run_id=run_id,
                seq=seq,
                location=self.where(run_id, seq),
                warned=warned,
            )
            found.append((seq, opened))
        return found

    def check(self, conn: sqlite3.Connection, run_id: str) -> InboxCheck:
        """Open every entry of the run's inbox, naming the damaged ones."""
        self._manifests.require(conn, run_id)
        check = InboxCheck()
        for seq, data in conn.execute(
            "SELECT seq, entry FROM inbox WHERE run_id = ? ORDER BY seq", (run_id,)
        ):
            check.open(self.codec, data, run_id=run_id, seq=seq, location=self.where(run_id, seq))
        return check


def _with_seq(entry: InboxEntry, seq: int) -> InboxEntry:
    return msgspec.structs.replace(entry, seq=seq)
