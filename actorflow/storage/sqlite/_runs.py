"""A SqliteStore's runs: manifests and the index of unfinished runs.

``runs`` holds each run's sealed manifest and its log's bounds; ``unfinished``
the ids of runs whose status is not finished, changed in the same
transaction as the manifest, so it is never wrong (``reindex`` still
rebuilds it, for a file edited by hand). A run's ``claims`` row is
:mod:`._claims`'s; deleting the run deletes it here.
Functions take a connection inside the caller's transaction (:mod:`._db`).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from actorflow.errors import (
    CorruptedDataError,
    EncryptionKeyError,
    InvalidRunIdError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage._manifests import (
    corrupt_manifest,
    data_without_manifest,
    encrypted_manifest,
    index_run_ids,
    index_strays,
    not_a_run,
)
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage._records import validate_run_id
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._records import RunManifest
    from actorflow.storage._sealing import Codec

__all__ = [
    "RUN_TABLES",
    "Manifests",
]

RUN_TABLES = ("log", "blobs", "snapshots", "inbox", "events")
"""The tables holding a run's data besides its manifest and claim."""


class Manifests:
    """Reading and writing manifests and the index with one codec, in one file."""

    def __init__(self, codec: Codec, location: str) -> None:
        self.codec = codec
        self.location = location
        self._warned: set[str] = set()  # index entries that are no run id, warned of

    def where(self, run_id: str) -> str:
        """The manifest's row, as errors name it."""
        return row(self.location, "runs", run_id)

    def load(self, run_id: str, data: bytes) -> RunManifest:
        """Open a stored manifest."""
        return self.codec.load_manifest(data, run_id=run_id, location=self.where(run_id))

    def read(self, conn: sqlite3.Connection, run_id: str) -> RunManifest:
        """The run's manifest.

        Raises:
            RunNotFoundError: no such run.
        """
        found = conn.execute("SELECT manifest FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if found is None:
            raise RunNotFoundError(run_id)
        return self.load(run_id, found[0])

    @staticmethod
    def require(conn: sqlite3.Connection, run_id: str) -> None:
        """Raise ``RunNotFoundError`` unless the run exists."""
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            raise RunNotFoundError(run_id)

    def create(self, conn: sqlite3.Connection, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Insert the run unless it exists (then return the stored manifest)."""
        run_id = manifest.run_id
        found = conn.execute("SELECT manifest FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if found is not None:
            return self.load(run_id, found[0]), False
        conn.execute(
            "INSERT INTO runs (run_id, manifest) VALUES (?, ?)",
            (run_id, self.codec.dump_manifest(manifest)),
        )
        self._index(conn, run_id, manifest)
        return manifest, True

    def write(self, conn: sqlite3.Connection, manifest: RunManifest) -> None:
        """Replace the run's manifest (the run exists), and its index entry."""
        conn.execute(
            "UPDATE runs SET manifest = ? WHERE run_id = ?",
            (self.codec.dump_manifest(manifest), manifest.run_id),
        )
        self._index(conn, manifest.run_id, manifest)

    @staticmethod
    def _index(conn: sqlite3.Connection, run_id: str, manifest: RunManifest) -> None:
        if manifest.status.finished or manifest.tombstone:
            conn.execute("DELETE FROM unfinished WHERE run_id = ?", (run_id,))
        else:
            conn.execute("INSERT OR IGNORE INTO unfinished (run_id) VALUES (?)", (run_id,))

    def change(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        change: Callable[[RunManifest], RunManifest],
        operation: str = "update run",
    ) -> RunManifest:
        """Replace the manifest with ``change(current)``."""
        new = change(self.read(conn, run_id))
        if new.run_id != run_id:
            raise StorageError(operation, f"change() may not rename run {run_id!r}")
        self.write(conn, new)
        return new

    def read_all(self, conn: sqlite3.Connection) -> tuple[list[RunManifest], list[UnreadableEntry]]:
        """Every readable manifest, and what is not one."""
        found: list[RunManifest] = []
        unreadable: list[UnreadableEntry] = []
        for run_id, data in conn.execute("SELECT run_id, manifest FROM runs"):
            where = self.where(run_id)
            if not _is_run_id(run_id):
                unreadable.append(not_a_run(where))
                continue
            try:
                found.append(self.load(run_id, data))
            except EncryptionKeyError as exc:
                unreadable.append(encrypted_manifest(run_id, where, exc))
            except CorruptedDataError as exc:
                unreadable.append(corrupt_manifest(run_id, exc))
        return found, unreadable

    @staticmethod
    def versions(conn: sqlite3.Connection) -> dict[str, str]:
        """A hash of each stored manifest's bytes, by run id (nothing opened or decoded)."""
        rows = conn.execute("SELECT run_id, manifest FROM runs")
        return {run_id: hashlib.blake2b(data, digest_size=12).hexdigest() for run_id, data in rows}

    def strays(self, conn: sqlite3.Connection) -> list[UnreadableEntry]:
        """Rows of a run's data whose run has no manifest, and index entries that are no id."""
        strays: list[UnreadableEntry] = []
        for table in RUN_TABLES:
            orphans = conn.execute(
                f"SELECT DISTINCT run_id FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)"
            ).fetchall()
            for (run_id,) in orphans:
                strays.append(data_without_manifest(run_id, row(self.location, table, run_id)))
        names = [r[0] for r in conn.execute("SELECT run_id FROM unfinished")]
        strays += index_strays(names, lambda name: row(self.location, "unfinished", name))
        return strays

    def delete(self, conn: sqlite3.Connection, run_id: str, tombstone: bool) -> int:
        """Delete the run's data (and, without ``tombstone``, the run); the bytes freed."""
        manifest = self.read(conn, run_id)
        freed = 0
        for table, column in _SIZED:
            size = conn.execute(
                f"SELECT COALESCE(SUM(length({column})), 0) FROM {table} WHERE run_id = ?",
                (run_id,),
            ).fetchone()[0]
            freed += int(size)
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM unfinished WHERE run_id = ?", (run_id,))
        if tombstone:
            conn.execute("UPDATE runs SET log_start = 0 WHERE run_id = ?", (run_id,))
            self.write(conn, make_tombstone(manifest))
            return freed
        stored = conn.execute("SELECT length(manifest) FROM runs WHERE run_id = ?", (run_id,))
        freed += int(stored.fetchone()[0])
        conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM claims WHERE run_id = ?", (run_id,))
        return freed

    # --- the index of unfinished runs --------------------------------------------------

    def unfinished(self, conn: sqlite3.Connection) -> list[str]:
        """The index's run ids; an entry that is no run id is skipped, warned of once."""
        names = [r[0] for r in conn.execute("SELECT run_id FROM unfinished")]
        return index_run_ids(
            names, lambda name: row(self.location, "unfinished", name), self._warned
        )

    @staticmethod
    def unindex(conn: sqlite3.Connection, run_id: str) -> None:
        """Drop the run's index entry."""
        conn.execute("DELETE FROM unfinished WHERE run_id = ?", (run_id,))

    @staticmethod
    def reset_index(conn: sqlite3.Connection, unfinished: set[str], before: set[str]) -> int:
        """Index exactly ``unfinished``, but for entries added since ``before`` was read.

        Returns how many entries went or came.
        """
        current = {r[0] for r in conn.execute("SELECT run_id FROM unfinished")}
        doomed = (current & before) - unfinished
        added = unfinished - current
        conn.executemany("DELETE FROM unfinished WHERE run_id = ?", [(r,) for r in doomed])
        conn.executemany(
            "INSERT OR IGNORE INTO unfinished (run_id) VALUES (?)", [(r,) for r in added]
        )
        return len(doomed) + len(added)


_SIZED = (
    ("log", "record"),
    ("blobs", "data"),
    ("snapshots", "data"),
    ("inbox", "entry"),
    ("events", "batch"),
)


def _is_run_id(name: str) -> bool:
    try:
        validate_run_id(name)
    except InvalidRunIdError:
        return False
    return True
