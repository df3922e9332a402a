"""A SqliteStore's snapshots: rows written once, without a sync, synced on demand.

``snapshots`` holds each snapshot with the self-listing name the file store
gives its file (:mod:`actorflow.storage._snapshot_names`: position, time,
phase, id, trigger, sizes; phase and trigger sealed when the store
encrypts), so listing reads no snapshot's bytes. A snapshot whose entry
cannot be a name (an empty phase, an entry too long) has no name and is
listed by the manifest, as in the file store.

A snapshot is sealed in the writer thread, before its transaction, and
written without a sync (``durable`` 0); syncing marks it durable in a
commit that syncs the WAL, and with it everything written before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import CheckpointNotFoundError
from actorflow.storage._manifests import (
    add_snapshot,
    live_snapshots,
    mark_snapshot,
    snapshot_info,
)
from actorflow.storage._records import SnapshotStatus
from actorflow.storage._snapshot_names import SnapshotNames
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from actorflow.storage._records import RunManifest, Snapshot, SnapshotInfo
    from actorflow.storage._sealing import Codec
    from actorflow.storage.sqlite._claims import Claims
    from actorflow.storage.sqlite._db import Database
    from actorflow.storage.sqlite._runs import Manifests

__all__ = ["SnapshotRows"]


class SnapshotRows:
    """The snapshot rows of every run in one file.

    Args:
        db: the store's connections.
        codec: seals the snapshots and their names.
        location: the database file, as errors name it.
        manifests: the runs' rows (a snapshot may be listed by its manifest).
        claims: the store's claims (an owner's write is fenced).
    """

    def __init__(
        self, db: Database, codec: Codec, location: str, manifests: Manifests, claims: Claims
    ) -> None:
        self.codec = codec
        self.location = location
        self.names = SnapshotNames(codec)
        self._db = db
        self._manifests = manifests
        self._claims = claims

    def where(self, run_id: str, snapshot_id: str) -> str:
        """A snapshot's row, as errors name it."""
        return row(self.location, "snapshots", run_id, "snapshot_id", snapshot_id)

    async def write(
        self, snapshot: Snapshot, update: Callable[[RunManifest], RunManifest] | None
    ) -> SnapshotInfo:
        """Seal the snapshot in the writer thread, then :meth:`put` it in one fenced commit.

        The commit is synced only when it rewrites the manifest (for
        ``update``, or a snapshot without a name). The entry returned is
        ``durable=False`` unless this snapshot was written and synced before.

        Raises:
            StorageError: the run holds a different snapshot with this id.
            LeaseLostError: this store held the run and another owner took it since.
        """
        run_id = snapshot.run_id
        made: list[tuple[SnapshotInfo, bytes, str | None]] = []

        def seal() -> bool:
            sealed, raw = self.codec.dump_snapshot(snapshot)
            info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
            name = self.names.entry(run_id, info)
            made.append((info, sealed, name))
            return name is None  # listed by the manifest, which is written durably

        def put(conn: sqlite3.Connection) -> tuple[SnapshotInfo, bool]:
            info, sealed, name = made[0]
            return info, self.put(conn, snapshot, info, sealed, name, update)

        info, durable = await self._db.write(
            self._claims.fenced(run_id, put), durable=update is not None, prepare=seal
        )
        return info if durable else msgspec.structs.replace(info, durable=False)

    def put(
        self,
        conn: sqlite3.Connection,
        snapshot: Snapshot,
        info: SnapshotInfo,
        sealed: bytes,
        name: str | None,
        update: Callable[[RunManifest], RunManifest] | None,
    ) -> bool:
        """Insert the snapshot, listed by ``name`` (or, without one, by the manifest).

        ``name`` is ``self.names.entry(run_id, info)``; ``update``, if given,
        changes the manifest in the same transaction. Returns whether the
        snapshot is durable (one written and synced before).

        Raises:
            StorageError: the run holds a different snapshot with this id.
        """
        run_id, snapshot_id = snapshot.run_id, snapshot.snapshot_id
        self._manifests.require(conn, run_id)
        taken = conn.execute(
            "SELECT data, durable FROM snapshots WHERE run_id = ? AND snapshot_id = ?",
            (run_id, snapshot_id),
        ).fetchone()
        durable = False
        if taken is not None:
            self._same(snapshot, taken[0])
            durable = bool(taken[1])  # written before: synced, it stays as it is
        if not durable:
            conn.execute(
                "INSERT OR REPLACE INTO snapshots "
                "(run_id, snapshot_id, name, position, created, durable, data) "
                "VALUES (?, ?, ?, ?, ?, 0, ?)",
                (run_id, snapshot_id, name, info.position, info.created, sealed),
            )
        if name is None or update is not None:

            def listed(m: RunManifest) -> RunManifest:
                m = add_snapshot(m, info) if name is None else m
                return update(m) if update is not None else m

            self._manifests.change(conn, run_id, listed, "write checkpoint")
        return durable

    def _same(self, snapshot: Snapshot, sealed: bytes) -> None:
        location = self.where(snapshot.run_id, snapshot.snapshot_id)
        self.codec.require_same_snapshot(sealed, snapshot, location=location)

    def read(self, conn: sqlite3.Connection, run_id: str, snapshot_id: str) -> Snapshot:
        """The snapshot, verified and decoded.

        Raises:
            CheckpointNotFoundError: no such snapshot.
            RunNotFoundError: no such run.
        """
        found = conn.execute(
            "SELECT data FROM snapshots WHERE run_id = ? AND snapshot_id = ?",
            (run_id, snapshot_id),
        ).fetchone()
        if found is None:
            self._manifests.require(conn, run_id)
            raise CheckpointNotFoundError(run_id, snapshot_id)
        return self.codec.load_snapshot(
            bytes(found[0]),
            run_id=run_id,
            snapshot_id=snapshot_id,
            location=self.where(run_id, snapshot_id),
        )

    def entries(self, conn: sqlite3.Connection, run_id: str) -> list[SnapshotInfo]:
        """The run's snapshots, oldest first (by position, then time)."""
        rows = conn.execute(
            "SELECT snapshot_id, name, durable FROM snapshots WHERE run_id = ?", (run_id,)
        ).fetchall()
        if not rows:
            self._manifests.require(conn, run_id)
            return []
        found: list[SnapshotInfo] = []
        unnamed: dict[str, bool] = {}
        for snapshot_id, name, durable in rows:
            info = self.names.parse(run_id, name) if name is not None else None
            if info is None:
                unnamed[snapshot_id] = bool(durable)
            else:
                found.append(info if durable else msgspec.structs.replace(info, durable=False))
        if unnamed:
            for info in live_snapshots(self._manifests.read(conn, run_id)):
                if info.snapshot_id in unnamed:
                    durable = unnamed[info.snapshot_id]
                    found.append(info if durable else msgspec.structs.replace(info, durable=False))
        return sorted(found, key=lambda s: (s.position, s.created, s.snapshot_id))

    def mark_durable(self, conn: sqlite3.Connection, run_id: str, ids: Sequence[str]) -> bool:
        """Mark the snapshots durable; whether any was not yet.

        Raises:
            CheckpointNotFoundError: one of them does not exist.
        """
        pending = False
        for snapshot_id in ids:
            found = conn.execute(
                "SELECT durable FROM snapshots WHERE run_id = ? AND snapshot_id = ?",
                (run_id, snapshot_id),
            ).fetchone()
            if found is None:
                raise CheckpointNotFoundError(run_id, snapshot_id)
            if not found[0]:
                pending = True
                conn.execute(
                    "UPDATE snapshots SET durable = 1 WHERE run_id = ? AND snapshot_id = ?",
                    (run_id, snapshot_id),
                )
        return pending

    def delete(self, conn: sqlite3.Connection, run_id: str, snapshot_id: str) -> int:
        """Delete one snapshot (marked deleted in the manifest if it lists it); bytes freed."""
        found = conn.execute(
            "SELECT name, length(data) FROM snapshots WHERE run_id = ? AND snapshot_id = ?",
            (run_id, snapshot_id),
        ).fetchone()
        if found is None:
            self._manifests.require(conn, run_id)
            return 0
        conn.execute(
            "DELETE FROM snapshots WHERE run_id = ? AND snapshot_id = ?", (run_id, snapshot_id)
        )
        if found[0] is None:
            self._manifests.change(
                conn, run_id, lambda m: mark_snapshot(m, snapshot_id, SnapshotStatus.DELETED)
            )
        return int(found[1])
