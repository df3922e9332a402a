"""A PostgresStore's snapshots: ``af_snapshots``, (run, id) -> listing entry and sealed snapshot.

A snapshot id is written once: writing it again must carry the same
snapshot. Without a manifest change a snapshot commits without a WAL flush
and is listed ``durable=False`` until ``sync``; an owned run's may instead
wait to ride with its next write (``_waiting.py``). Such a write takes the
run's fence lock shared, not its row: appends go on meanwhile, while a
claim's epoch change (which takes the fence exclusively) waits for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import msgspec

from actorflow.errors import (
    CheckpointNotFoundError,
    RunNotFoundError,
)
from actorflow.storage._manifests import snapshot_info, validate_snapshot_id
from actorflow.storage._records import SnapshotInfo, validate_run_id
from actorflow.storage.postgres import _direct as direct
from actorflow.storage.postgres._inbox import require_run

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._records import RunManifest, Snapshot
    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database
    from actorflow.storage.postgres._owned import OwnedRuns
    from actorflow.storage.postgres._runs import RunRows
    from actorflow.storage.postgres._waiting import WaitingRows

__all__ = ["SnapshotRows"]

# module-level: in the class, `list` names its method
_Infos: TypeAlias = "list[SnapshotInfo]"

_encode = msgspec.msgpack.Encoder().encode
_decode_info = msgspec.msgpack.Decoder(SnapshotInfo).decode


class SnapshotRows:
    """The ``af_snapshots`` table.

    Args:
        db: the store's connections.
        codec: seals and opens the snapshots.
        owned: the runs this store owns (their epochs fence the writes).
        waiting: rows waiting for an append (written before this store reads).
        runs: the runs' rows (a snapshot may change the manifest in its commit).
        where: names a run's part in errors (``where(run_id, "snapshots", id)``).
    """

    def __init__(
        self,
        db: Database,
        codec: Codec,
        owned: OwnedRuns,
        waiting: WaitingRows,
        runs: RunRows,
        where: Callable[..., str],
    ) -> None:
        self._db = db
        self.codec = codec
        self._owned = owned
        self._waiting = waiting
        self._runs = runs
        self._where = where

    async def write(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """Write the snapshot (see :meth:`PostgresStore.write_snapshot`); its listing entry."""
        run_id = validate_run_id(snapshot.run_id)
        snapshot_id = validate_snapshot_id(snapshot.snapshot_id)
        durable = update is not None
        fence = self._owned.fence_key(run_id)
        sealed_once: list[tuple[bytes, SnapshotInfo]] = []
        if not durable and self._waiting.may_wait(run_id):
            sealed, raw = self.codec.dump_snapshot(snapshot)
            waits = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
            waits = msgspec.structs.replace(waits, durable=False)
            if self._waiting.defer_snapshot(run_id, waits, sealed):
                return waits
            sealed_once.append((sealed, waits))
        # after the rows waiting: this one may name a history chunk among them
        await self._waiting.settle(run_id)

        def write(conn: Connection, retried: bool) -> SnapshotInfo:
            if not sealed_once:
                sealed, raw = self.codec.dump_snapshot(snapshot)
                info = snapshot_info(snapshot, stored_size=len(sealed), raw_size=raw)
                sealed_once.append((sealed, msgspec.structs.replace(info, durable=durable)))
            sealed, info = sealed_once[0]
            if not durable and not retried and self._fast(conn, run_id, sealed, info):
                return info
            with conn.pipeline(), conn.transaction():
                if not durable:
                    conn.execute("SET LOCAL synchronous_commit = off")
                if update is None:
                    # a shared fence, not the row: appends (which lock the row) go on
                    # meanwhile, while a claim's epoch waits for this commit (see _claims.py)
                    conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (fence,))
                    query = "SELECT manifest, epoch FROM af_runs WHERE run_id = %s"
                else:
                    query = "SELECT manifest, epoch FROM af_runs WHERE run_id = %s FOR UPDATE"
                got = conn.execute(query, (run_id,))
                inserted = conn.execute(
                    "INSERT INTO af_snapshots (run_id, snapshot_id, info, data, durable) "
                    "SELECT %s, %s, %s, %s, %s WHERE EXISTS "
                    "(SELECT 1 FROM af_runs WHERE run_id = %s) "
                    "ON CONFLICT DO NOTHING RETURNING 1",
                    (run_id, snapshot_id, _encode(info), sealed, durable, run_id),
                )
                row = got.fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                if inserted.fetchone() is None:
                    taken = conn.execute(
                        "SELECT info, data FROM af_snapshots "
                        "WHERE run_id = %s AND snapshot_id = %s",
                        (run_id, snapshot_id),
                    ).fetchone()
                    assert taken is not None
                    if retried and bytes(taken[1]) == sealed:
                        return info  # the lost try's commit landed
                    self._same(snapshot, bytes(taken[1]))
                    info = _decode_info(bytes(taken[0]))
                self._owned.fence(run_id, int(row[1]))
                if update is not None:
                    self._runs.change(conn, run_id, row, update, "write checkpoint")
                return info

        written: SnapshotInfo = await self._db.run("write checkpoint", write)
        return written

    def _fast(self, conn: Connection, run_id: str, sealed: bytes, info: SnapshotInfo) -> bool:
        """One round trip: the snapshot inserted, if the run is there under this store's epoch.

        False if nothing was written (no such run, the id is taken, or the epoch
        moved on): the full write then finds out which, and says so.
        """
        lease = self._owned.leases.get(run_id)
        if lease is not None and self._owned.lost(run_id):
            return False
        epoch = lease.epoch if lease is not None else None
        with conn.pipeline(), conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            # the shared fence first: a claim's epoch change waits for this commit,
            # or has committed before the INSERT's snapshot of the row is taken
            conn.execute(
                "SELECT pg_advisory_xact_lock_shared(%s)", (self._owned.fence_key(run_id),)
            )
            inserted = conn.execute(
                "INSERT INTO af_snapshots (run_id, snapshot_id, info, data, durable) "
                "SELECT %s, %s, %s, %s, false WHERE EXISTS (SELECT 1 FROM af_runs "
                "WHERE run_id = %s AND (%s::bigint IS NULL OR epoch = %s)) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (run_id, info.snapshot_id, _encode(info), sealed, run_id, epoch, epoch),
            )
        return inserted.fetchone() is not None

    def _same(self, snapshot: Snapshot, sealed: bytes) -> None:
        location = self._where(snapshot.run_id, "snapshots", snapshot.snapshot_id)
        self.codec.require_same_snapshot(sealed, snapshot, location=location)

    async def sync(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """Mark the snapshots durable, in one synchronous commit."""
        validate_run_id(run_id)
        wanted = sorted({validate_snapshot_id(s) for s in snapshot_ids})
        if not wanted:
            return
        await self._waiting.settle(run_id)

        def mark(conn: Connection, retried: bool) -> set[str]:
            with conn.transaction():
                require_run(conn, run_id)
                rows = conn.execute(
                    "SELECT snapshot_id, info FROM af_snapshots "
                    "WHERE run_id = %s AND snapshot_id = ANY(%s) FOR UPDATE",
                    (run_id, wanted),
                ).fetchall()
                for snapshot_id, info in rows:
                    entry = _decode_info(bytes(info))
                    if not entry.durable:
                        conn.execute(
                            "UPDATE af_snapshots SET durable = true, info = %s "
                            "WHERE run_id = %s AND snapshot_id = %s",
                            (
                                _encode(msgspec.structs.replace(entry, durable=True)),
                                run_id,
                                snapshot_id,
                            ),
                        )
                conn.execute("SELECT pg_current_xact_id()")  # a commit record to flush
            return {str(r[0]) for r in rows}

        found: set[str] = await self._db.run("sync checkpoints", mark)
        missing = [s for s in wanted if s not in found]
        if missing:
            raise CheckpointNotFoundError(run_id, missing[0])

    async def read(self, run_id: str, snapshot_id: str) -> Snapshot:
        """The snapshot, verified and decoded."""
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        await self._waiting.settle(run_id)

        def read(conn: Connection, retried: bool) -> Snapshot:
            row = conn.execute(
                "SELECT (SELECT data FROM af_snapshots WHERE run_id = %s AND snapshot_id = %s) "
                "FROM af_runs WHERE run_id = %s",
                (run_id, snapshot_id, run_id),
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            if row[0] is None:
                raise CheckpointNotFoundError(run_id, snapshot_id)
            return self.codec.load_snapshot(
                bytes(row[0]),
                run_id=run_id,
                snapshot_id=snapshot_id,
                location=self._where(run_id, "snapshots", snapshot_id),
            )

        snap: Snapshot = await self._db.run("read checkpoint", read)
        return snap

    async def list(self, run_id: str) -> _Infos:
        """The run's listing entries, by position."""
        validate_run_id(run_id)
        await self._waiting.settle(run_id)
        got = await direct.read_rows(
            self._db, b"SELECT info FROM af_snapshots WHERE run_id = $1", run_id
        )
        if got is not None and got.ntuples:  # none: is there such a run? the thread's way says
            entries = [_decode_info(bytes(got.get_value(i, 0) or b"")) for i in range(got.ntuples)]
            return sorted(entries, key=lambda s: (s.position, s.created, s.snapshot_id))

        def listing(conn: Connection, retried: bool) -> _Infos:
            rows = conn.execute(
                "SELECT info FROM af_snapshots WHERE run_id = %s", (run_id,)
            ).fetchall()
            if not rows:
                require_run(conn, run_id)
            infos = [_decode_info(bytes(r[0])) for r in rows]
            return sorted(infos, key=lambda s: (s.position, s.created, s.snapshot_id))

        infos: _Infos = await self._db.run("list checkpoints", listing)
        return infos

    async def delete(self, run_id: str, snapshot_id: str) -> int:
        """Delete the snapshot: the bytes freed (0 if it was not there)."""
        validate_run_id(run_id)
        validate_snapshot_id(snapshot_id)
        await self._waiting.settle(run_id)

        def delete(conn: Connection, retried: bool) -> int:
            with conn.transaction():
                # a deletion need not survive a crash (see Store.delete_snapshot)
                conn.execute("SET LOCAL synchronous_commit = off")
                require_run(conn, run_id)
                row = conn.execute(
                    "DELETE FROM af_snapshots WHERE run_id = %s AND snapshot_id = %s "
                    "RETURNING octet_length(data)",
                    (run_id, snapshot_id),
                ).fetchone()
            return int(row[0]) if row is not None else 0

        freed: int = await self._db.run("delete checkpoint", delete)
        return freed
