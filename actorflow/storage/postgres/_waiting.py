"""Snapshots and chunks of an owned run that wait for its next append, and their own commit.

Whether a row may wait (``may_wait``), and queueing it, are here; an append,
or an owner's unsynced manifest update, takes the run's waiting rows into
its statement (``_statements.py``). Rows no such write took are written in a
commit of their own: by the flusher thread once they have waited ``delay``
seconds (``_deferred.py``), and by :meth:`WaitingRows.settle` before any
call of this store that reads or changes the run's snapshots or blobs, so
that no caller sees them missing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import msgspec
import psycopg

from actorflow._log import get_logger
from actorflow.errors import CorruptedDataError, EncryptionKeyError, StorageError
from actorflow.storage.postgres._deferred import Flusher
from actorflow.storage.postgres._direct import DIRECT_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._records import SnapshotInfo
    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database
    from actorflow.storage.postgres._deferred import Waiting
    from actorflow.storage.postgres._owned import OwnedRuns

__all__ = ["WaitingRows"]

_log = get_logger(__name__)

_encode = msgspec.msgpack.Encoder().encode


class WaitingRows:
    """The waiting snapshots and chunks of the runs this store owns.

    Args:
        db: the store's connections.
        codec: seals the chunks.
        owned: the runs this store owns (their leases, and the rows waiting).
        delay: seconds a row may wait for its run's next append (0: none waits).
    """

    def __init__(self, db: Database, codec: Codec, owned: OwnedRuns, delay: float) -> None:
        self._db = db
        self._codec = codec
        self._owned = owned
        self._flusher = Flusher(delay, self._flush, owned.deferred)

    def may_wait(self, run_id: str) -> bool:
        """Whether a snapshot or chunk of ``run_id`` may wait for the run's next append.

        Only for a run this store owns and has appended to (it knows the log's
        end, so the append goes in one statement that carries them).
        """
        owned = self._owned
        return (
            self._flusher.delay > 0
            and not owned.closed
            and run_id in owned.leases
            and run_id in owned.log_end
            and not owned.lost(run_id)
        )

    def defer_blob(self, run_id: str, data: bytes) -> str | None:
        """The address of ``data``, sealed to wait for the run's next append; None if it may not."""
        if self.may_wait(run_id):
            address, sealed = self._codec.dump_blob(data, run_id=run_id)
            deferred = self._owned.deferred
            if self._queue(run_id, sealed, lambda e: deferred.add_blob(run_id, e, address, sealed)):
                return address
        return None

    def defer_snapshot(self, run_id: str, info: SnapshotInfo, sealed: bytes) -> bool:
        """Let a sealed snapshot of a run that :meth:`may_wait` wait; False if it cannot."""
        deferred = self._owned.deferred
        return self._queue(run_id, sealed, lambda e: deferred.add_snapshot(run_id, e, info, sealed))

    def _queue(self, run_id: str, sealed: bytes, add: Callable[[int], bool]) -> bool:
        """``add`` a row under the run's epoch if it is small enough to ride in an append."""
        epoch = self._owned.leases[run_id].epoch
        if len(sealed) <= DIRECT_BYTES and add(epoch):
            self._flusher.poke()
            return True
        return False

    async def settle(self, run_id: str) -> None:
        """Write the run's waiting snapshots and chunks now (before this store reads them)."""
        if self._owned.deferred.has(run_id):
            await self._db.run("write checkpoint", lambda conn, _: self._write(conn, run_id))

    async def carried(self, run_id: str, waiting: Waiting | None, inserted: int) -> None:
        """Say, as their own commit would, which waiting snapshots a statement did not write.

        An append or an update that carried ``waiting``'s rows inserted
        ``inserted`` of its snapshots; one it skipped has an id taken already,
        by the same snapshot (a retry) or by another one, which is said here.
        Only then does this read: a check in a worker thread, after the commit.
        """
        if waiting is None or inserted >= len(waiting.snapshots):
            return

        def check(conn: Connection, retried: bool) -> None:
            for info, sealed in waiting.snapshots:
                self._same_stored(conn, run_id, info.snapshot_id, sealed)

        # shielded: the statement has committed, and what it skipped is said once
        with anyio.CancelScope(shield=True), contextlib.suppress(StorageError):
            await self._db.run("write checkpoint", check)

    async def stop(self) -> None:
        """Stop the flusher thread, then write every run's waiting rows (what fails is lost)."""
        await anyio.to_thread.run_sync(self._flusher.stop)
        for run_id in self._owned.deferred.runs():
            with contextlib.suppress(StorageError):
                await self.settle(run_id)

    def _flush(self, run_id: str) -> None:
        """The flusher thread's write of rows that waited too long."""
        if self._owned.deferred.has(run_id) and not self._owned.closed:
            self._db.call("write checkpoint", lambda conn, _: self._write(conn, run_id))

    def _write(self, conn: Connection, run_id: str) -> None:
        """The run's waiting rows in one commit without a WAL flush (in a worker thread).

        Under the epoch they were written in (the lease may be released since):
        rows of a run another owner took since are dropped (the log has
        everything they summarise).
        """
        with self._owned.appending(run_id):
            waiting = self._owned.deferred.take(run_id)
            if waiting is None:
                return
            try:
                with conn.transaction():
                    conn.execute("SET LOCAL synchronous_commit = off")
                    conn.execute(
                        "SELECT pg_advisory_xact_lock_shared(%s)",
                        (self._owned.fence_key(run_id),),
                    )
                    row = conn.execute(
                        "SELECT epoch FROM af_runs WHERE run_id = %s", (run_id,)
                    ).fetchone()
                    if row is None or int(row[0]) != waiting.epoch:
                        _log.warning(
                            "postgres_deferred_writes_dropped",
                            run_id=run_id,
                            snapshots=[i.snapshot_id for i, _ in waiting.snapshots],
                            reason="the run is gone" if row is None else "another owner took it",
                        )
                        return
                    self._insert(conn, run_id, waiting, durable=False)
            except psycopg.OperationalError:
                if conn.broken or conn.closed:
                    # tried again on a new connection
                    self._owned.deferred.give_back(run_id, waiting)
                raise

    def _insert(self, conn: Connection, run_id: str, waiting: Waiting, *, durable: bool) -> None:
        with conn.cursor() as cur:
            if waiting.blobs:
                cur.executemany(
                    "INSERT INTO af_blobs (run_id, address, data) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    [(run_id, a, d) for a, d in waiting.blobs.items()],
                )
            for info, sealed in waiting.snapshots:
                info = msgspec.structs.replace(info, durable=durable)
                cur.execute(
                    "INSERT INTO af_snapshots (run_id, snapshot_id, info, data, durable) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                    (run_id, info.snapshot_id, _encode(info), sealed, durable),
                )
                if cur.fetchone() is None:
                    self._same_stored(conn, run_id, info.snapshot_id, sealed)

    def _same_stored(self, conn: Connection, run_id: str, snapshot_id: str, sealed: bytes) -> None:
        """A waiting snapshot whose id was taken meanwhile: the same one, or said loudly."""
        row = conn.execute(
            "SELECT data FROM af_snapshots WHERE run_id = %s AND snapshot_id = %s",
            (run_id, snapshot_id),
        ).fetchone()
        if row is not None and not self._same(run_id, snapshot_id, bytes(row[0]), sealed):
            _log.warning(
                "postgres_checkpoint_id_taken",
                run_id=run_id,
                snapshot_id=snapshot_id,
                error="the run already holds a different checkpoint with this id; "
                "this one was not written",
            )

    def _same(self, run_id: str, snapshot_id: str, stored: bytes, sealed: bytes) -> bool:
        """Whether two sealed snapshots are the same one (encrypted twice, the bytes differ)."""
        if stored == sealed:
            return True
        location = f"af_snapshots {run_id}/{snapshot_id}"  # only for errors, caught here
        try:
            return self._codec.load_snapshot(
                stored, run_id=run_id, snapshot_id=snapshot_id, location=location
            ) == self._codec.load_snapshot(
                sealed, run_id=run_id, snapshot_id=snapshot_id, location=location
            )
        except (CorruptedDataError, EncryptionKeyError):
            return False  # not readable as this one: another
