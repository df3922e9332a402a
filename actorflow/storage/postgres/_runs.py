"""A PostgresStore's runs: ``af_runs`` (one row per run) and the index ``af_unfinished``.

A run's row holds its sealed manifest, its log's and inbox's ends, the
claim's epoch and last owner, and its advisory-lock key. The index of
unfinished runs is written in the same statements as the manifests, so it
is never wrong (``reindex`` still rebuilds it). A run created running for
an owner is claimed in the same call, on the lock connection (``_locks.py``).
A manifest is read, and an owner's unsynced update sent (with the rows
waiting for the run's next write), from the event loop's thread
(``_direct.py``) when a connection is idle. A status that hands a run to
workers (``queued``, ``interrupted``) notifies them in its commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import psycopg

from actorflow._log import get_logger
from actorflow.errors import CorruptedDataError, EncryptionKeyError, RunNotFoundError, StorageError
from actorflow.storage._manifests import (
    corrupt_manifest,
    encrypted_manifest,
    index_run_ids,
    index_strays,
    matches,
    warn_unreadable,
)
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage._protocol import Lease
from actorflow.storage._records import RunStatus, validate_run_id
from actorflow.storage.postgres import _direct as direct
from actorflow.storage.postgres._direct import BYTEA, TEXT, UNKNOWN, Unknown
from actorflow.storage.postgres._locks import HELD_KEYS
from actorflow.storage.postgres._notify import WORK
from actorflow.storage.postgres._statements import update_statement

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._records import RunManifest
    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database
    from actorflow.storage.postgres._deferred import Waiting
    from actorflow.storage.postgres._locks import Locks
    from actorflow.storage.postgres._owned import OwnedRuns
    from actorflow.storage.postgres._waiting import WaitingRows

__all__ = ["RunRows"]

_log = get_logger(__name__)

_TAKEABLE = frozenset({RunStatus.QUEUED, RunStatus.INTERRUPTED})
"""Statuses a run is stored in for a worker to take: submitted, or given up by a runtime."""


class RunRows:
    """The ``af_runs`` table's manifests, and the index of unfinished runs.

    Args:
        db: the store's connections.
        codec: seals and opens the manifests.
        owned: the runs this store owns (claimed at creation, fenced on update).
        locks: the store's lock connection (a run created for an owner is claimed on it).
        waiting: rows waiting for a write (an unsynced update carries them).
        where: names a run's part in errors (``where(run_id)``).
        place: where the store is, to name the index's rows.
        channel: the store's NOTIFY channel.
        started: called before a run is claimed (the store starts its listener,
            whose ticks check the lock connection).
    """

    def __init__(
        self,
        db: Database,
        codec: Codec,
        owned: OwnedRuns,
        locks: Locks,
        waiting: WaitingRows,
        where: Callable[..., str],
        *,
        place: str,
        channel: str,
        started: Callable[[], None],
    ) -> None:
        self._db = db
        self.codec = codec
        self._owned = owned
        self._locks = locks
        self._waiting = waiting
        self._where = where
        self._place = place
        self._channel = channel
        self._started = started
        self._index_warned: set[str] = set()

    async def create(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Create the run's row (claimed for its owner when it names one); whether this call did."""
        run_id = validate_run_id(manifest.run_id)
        key = self._owned.key(run_id)
        owner = manifest.owner
        if owner is not None and not manifest.status.finished and manifest.status not in _TAKEABLE:
            return await self._create_claimed(manifest, owner)

        sealed_once: list[bytes] = []

        def create_sealed(conn: Connection, retried: bool) -> tuple[RunManifest, bool]:
            if not sealed_once:
                sealed_once.append(self.codec.dump_manifest(manifest))
            return _create(conn, retried, sealed_once[0])

        def _create(conn: Connection, retried: bool, sealed: bytes) -> tuple[RunManifest, bool]:
            # one statement: the row and, for an unfinished run, its index entry commit together
            row = conn.execute(
                "WITH r AS (INSERT INTO af_runs (run_id, lock_key, manifest) "
                "VALUES (%s, %s, %s) ON CONFLICT (run_id) DO NOTHING RETURNING run_id), "
                "u AS (INSERT INTO af_unfinished (run_id) SELECT run_id FROM r WHERE %s "
                "ON CONFLICT DO NOTHING) "
                "SELECT run_id FROM r",
                (run_id, key, sealed, not manifest.status.finished),
            ).fetchone()
            if row is not None:
                if manifest.status in _TAKEABLE:  # submitted: idle workers look at once
                    conn.execute("SELECT pg_notify(%s, %s)", (self._channel, f"{WORK}:"))
                return manifest, True
            found = conn.execute(
                "SELECT manifest FROM af_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            assert found is not None
            if retried and bytes(found[0]) == sealed:
                return manifest, True  # the lost try created it
            return self._manifest(run_id, bytes(found[0])), False

        result: tuple[RunManifest, bool] = await self._db.run("create run", create_sealed)
        return result

    async def _create_claimed(self, manifest: RunManifest, owner: str) -> tuple[RunManifest, bool]:
        """:meth:`create_run` on the lock connection: the run's lock, then its row at epoch 1."""
        run_id = manifest.run_id
        key = self._owned.key(run_id)
        locks = self._locks
        sealed = self.codec.dump_manifest(manifest)
        done = await self._create_claimed_direct(manifest, owner, sealed)
        if isinstance(done, tuple):
            return done
        tries = 1 if done is UNKNOWN else 0

        def create(conn: Connection) -> tuple[RunManifest, bool, bool]:
            nonlocal tries
            tries += 1
            # a lock this store held already is not ours to take (or to let go) here
            mine = not locks.holds(key) and locks.try_lock(conn, key)
            if tries > 1 and locks.holds(key):
                mine = True  # an earlier try took it, then lost its connection
            row = conn.execute(
                "WITH r AS (INSERT INTO af_runs (run_id, lock_key, manifest, epoch, owner) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING RETURNING run_id), "
                "u AS (INSERT INTO af_unfinished (run_id) SELECT run_id FROM r "
                "ON CONFLICT DO NOTHING) "
                "SELECT run_id FROM r",
                (run_id, key, sealed, 1 if mine else 0, owner if mine else None),
            ).fetchone()
            if row is not None:
                return manifest, True, mine
            found = conn.execute(
                "SELECT manifest FROM af_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            assert found is not None
            if tries > 1 and bytes(found[0]) == sealed:
                return manifest, True, mine  # the lost try created it
            if mine:
                locks.unlock(conn, key)
            return self._manifest(run_id, bytes(found[0])), False, False

        self._started()  # its ticks keep the lock connection checked
        stored, created, claimed = await anyio.to_thread.run_sync(locks.call, "create run", create)
        if claimed:
            self._owned.created[run_id] = Lease(run_id=run_id, owner=owner, epoch=1)
        return stored, created

    async def _create_claimed_direct(
        self, manifest: RunManifest, owner: str, sealed: bytes
    ) -> tuple[RunManifest, bool] | Unknown | None:
        """:meth:`_create_claimed` in one statement from the event loop's thread.

        ``None`` when it cannot be done so (the lock connection is busy, the
        key held already, the run exists): the worker thread's way then says
        what is what. ``UNKNOWN`` if the connection was lost before the answer.
        """
        run_id = manifest.run_id
        key = self._owned.key(run_id)
        locks = self._locks
        if locks.holds(key):
            return None
        conn = locks.borrow()
        if conn is None:
            return None
        query = (
            b"WITH l AS (SELECT pg_try_advisory_lock($2::bigint) AS got), "
            b"r AS (INSERT INTO af_runs (run_id, lock_key, manifest, epoch, owner) "
            b"SELECT $1, $2::bigint, $3::bytea, CASE WHEN l.got THEN 1 ELSE 0 END, "
            b"CASE WHEN l.got THEN $4 END FROM l "
            b"ON CONFLICT (run_id) DO NOTHING RETURNING run_id), "
            b"u AS (INSERT INTO af_unfinished (run_id) SELECT run_id FROM r "
            b"ON CONFLICT DO NOTHING) "
            b"SELECT l.got, (SELECT count(*) FROM r) FROM l"
        )
        params: list[bytes | None] = [run_id.encode(), str(key).encode(), sealed, owner.encode()]
        try:
            result = await direct.execute(conn.pgconn, query, params, [TEXT, TEXT, BYTEA, TEXT])
        except psycopg.Error as exc:
            lost = conn.broken or conn.closed
            locks.give_back(conn)
            if lost:  # the session ended, and its lock with it; the row may be there
                _log.warning("postgres_connection_lost", operation="create run", error=str(exc))
                return UNKNOWN
            return None
        got = result.get_value(0, 0) == b"t"
        if got:
            locks.took(key)
        locks.give_back(conn)
        if result.get_value(0, 1) != b"1":
            if got:
                locks.unlock_soon(key)
            return None  # there already: the worker thread reads what is there
        if got:
            self._owned.created[run_id] = Lease(run_id=run_id, owner=owner, epoch=1)
        return manifest, True

    async def read(self, run_id: str) -> RunManifest:
        """The run's manifest."""
        validate_run_id(run_id)
        got = await direct.read_rows(
            self._db, b"SELECT manifest FROM af_runs WHERE run_id = $1", run_id
        )
        data = got.get_value(0, 0) if got is not None and got.ntuples == 1 else None
        if data is not None:
            return self._manifest(run_id, bytes(data))

        def read(conn: Connection, retried: bool) -> RunManifest:
            row = conn.execute(
                "SELECT manifest FROM af_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            return self._manifest(run_id, bytes(row[0]))

        manifest: RunManifest = await self._db.run("read run", read)
        return manifest

    async def update(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """Replace the manifest (see :meth:`PostgresStore.update_run`)."""
        validate_run_id(run_id)
        written: list[tuple[int, bytes, RunManifest]] = []
        unknown = False
        if not durable and run_id in self._owned.leases:
            done = await self._update_direct(run_id, change, written)
            if isinstance(done, Unknown):
                unknown = True
            elif done is not None:
                return done

        def update(conn: Connection, retried: bool) -> RunManifest:
            retried = retried or unknown
            with conn.pipeline(), conn.transaction():
                if not durable:
                    conn.execute("SET LOCAL synchronous_commit = off")
                row = conn.execute(
                    "SELECT manifest, version, epoch FROM af_runs WHERE run_id = %s FOR UPDATE",
                    (run_id,),
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                if retried and written:
                    version, sealed, new = written[-1]
                    if int(row[1]) == version + 1 and bytes(row[0]) == sealed:
                        return new  # the lost try's commit landed
                self._owned.fence(run_id, int(row[2]))
                new, sealed = self.change(conn, run_id, row, change, "update run")
                written.append((int(row[1]), sealed, new))
                return new

        manifest: RunManifest = await self._db.run("update run", update)
        return manifest

    async def _update_direct(
        self,
        run_id: str,
        change: Callable[[RunManifest], RunManifest],
        written: list[tuple[int, bytes, RunManifest]],
    ) -> RunManifest | Unknown | None:
        """An owner's unsynced :meth:`update_run` from the event loop's thread: two statements.

        The row is read, changed here and written back if its version is
        still the one read, in a commit without a WAL flush. ``None`` when it
        cannot be done so (no idle connection, a change that wakes workers or
        takes a run out of the finished, the version moved on): the worker
        thread's way then does it. ``UNKNOWN`` if the connection was lost
        after the write was sent (``written`` holds what was sent).
        """
        conn = self._db.borrow_idle()
        if conn is None:
            return None
        sent = False
        waiting: Waiting | None = None
        try:
            got = await direct.execute(
                conn.pgconn,
                b"SELECT manifest, version, epoch FROM af_runs WHERE run_id = $1",
                [run_id.encode()],
                [TEXT],
                binary=True,
            )
            if got.ntuples != 1:
                return None  # gone: the worker thread's way says so
            data = got.get_value(0, 0)
            version = int.from_bytes(got.get_value(0, 1) or b"", "big", signed=True)
            epoch = int.from_bytes(got.get_value(0, 2) or b"", "big", signed=True)
            assert data is not None
            self._owned.fence(run_id, epoch)
            current = self._manifest(run_id, bytes(data))
            new = change(current)
            if new.run_id != run_id:
                raise StorageError("update run", f"change() may not rename run {run_id!r}")
            if (new.status in _TAKEABLE and new.status is not current.status) or (
                current.status.finished and not new.status.finished
            ):
                return None
            sealed = self.codec.dump_manifest(new)
            ends = new.status.finished and not current.status.finished
            written.append((version, sealed, new))
            waiting = self._owned.deferred.take(run_id)
            if waiting is not None and waiting.epoch != epoch:
                self._owned.deferred.give_back(run_id, waiting)
                waiting = None
            st = update_statement(run_id, sealed, version, epoch, ends=ends, waiting=waiting)
            sent = True
            done = await direct.execute(conn.pgconn, st.text, st.params, st.types)
        except psycopg.Error as exc:
            if waiting is not None:
                self._owned.deferred.give_back(run_id, waiting)  # written again: same rows, no harm
            if not (conn.broken or conn.closed):
                return None  # refused: the worker thread's try says why
            _log.warning("postgres_connection_lost", operation="update run", error=str(exc))
            return UNKNOWN if sent else None
        finally:
            self._db.give_back(conn)
        if done.get_value(0, 1) != b"1":
            if waiting is not None:
                self._owned.deferred.give_back(run_id, waiting)
            return None
        await self._waiting.carried(run_id, waiting, int(done.get_value(0, 2) or 0))
        return new

    def change(
        self,
        conn: Connection,
        run_id: str,
        row: tuple[Any, ...],
        change: Callable[[RunManifest], RunManifest],
        operation: str,
    ) -> tuple[RunManifest, bytes]:
        """Apply ``change`` to the locked row's manifest and write it (inside a transaction)."""
        current = self._manifest(run_id, bytes(row[0]))
        new = change(current)
        if new.run_id != run_id:
            raise StorageError(operation, f"change() may not rename run {run_id!r}")
        sealed = self.codec.dump_manifest(new)
        conn.execute(
            "UPDATE af_runs SET manifest = %s, version = version + 1 WHERE run_id = %s",
            (sealed, run_id),
        )
        if new.status in _TAKEABLE and new.status is not current.status:
            # idle workers (watch_work) look at once; NOTIFY is sent with the commit
            conn.execute("SELECT pg_notify(%s, %s)", (self._channel, f"{WORK}:"))
        if new.status.finished != current.status.finished:
            if new.status.finished:
                conn.execute("DELETE FROM af_unfinished WHERE run_id = %s", (run_id,))
            else:
                conn.execute(
                    "INSERT INTO af_unfinished (run_id) VALUES (%s) ON CONFLICT DO NOTHING",
                    (run_id,),
                )
        return new, sealed

    async def list_versions(self) -> dict[str, str]:
        """Each row's creation order and version."""

        def versions(conn: Connection, retried: bool) -> dict[str, str]:
            rows = conn.execute("SELECT run_id, created_order, version FROM af_runs")
            return {str(r[0]): f"{r[1]}.{r[2]}" for r in rows}

        found: dict[str, str] = await self._db.run("list run versions", versions)
        return found

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """The manifests that match, oldest first (unreadable ones warned of)."""
        found, unreadable = await self._db.run("list runs", self._read_all)
        warn_unreadable(unreadable)
        return [m for m in found if matches(m, status, workflow)]

    def _read_all(
        self, conn: Connection, retried: bool
    ) -> tuple[list[RunManifest], list[UnreadableEntry]]:
        rows = conn.execute(
            "SELECT run_id, manifest FROM af_runs ORDER BY created_order"
        ).fetchall()
        found: list[tuple[float, int, RunManifest]] = []
        unreadable: list[UnreadableEntry] = []
        for order, (run_id, data) in enumerate(rows):
            try:
                manifest = self._manifest(run_id, bytes(data))
            except EncryptionKeyError as exc:
                unreadable.append(encrypted_manifest(run_id, self._where(run_id), exc))
                continue
            except CorruptedDataError as exc:
                unreadable.append(corrupt_manifest(run_id, exc))
                continue
            found.append((manifest.created, order, manifest))
        found.sort(key=lambda t: (t[0], t[1]))
        return [m for _, _, m in found], unreadable

    async def list_unreadable(self) -> list[UnreadableEntry]:
        """Manifests that cannot be read, and index rows that name no run id."""
        unreadable: list[UnreadableEntry]
        _, unreadable = await self._db.run("list runs", self._read_all)

        def strays(conn: Connection, retried: bool) -> list[str]:
            return [str(r[0]) for r in conn.execute("SELECT run_id FROM af_unfinished")]

        names: list[str] = await self._db.run("list unfinished", strays)
        return unreadable + index_strays(names, self._index_location)

    async def delete(self, run_id: str, *, tombstone: bool = True) -> int:
        """Delete the run's rows (a tombstone keeps its row in ``af_runs``): the bytes freed."""
        validate_run_id(run_id)
        self._owned.deferred.drop(run_id)

        def delete(conn: Connection, retried: bool) -> int:
            with conn.transaction():
                row = conn.execute(
                    "SELECT manifest FROM af_runs WHERE run_id = %s FOR UPDATE", (run_id,)
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(run_id)
                freed = 0
                for table in ("af_log", "af_blobs", "af_snapshots", "af_inbox", "af_events"):
                    got = conn.execute(
                        f"WITH gone AS (DELETE FROM {table} WHERE run_id = %s RETURNING data) "
                        "SELECT coalesce(sum(octet_length(data)), 0) FROM gone",
                        (run_id,),
                    ).fetchone()
                    freed += int(got[0]) if got is not None else 0
                conn.execute("DELETE FROM af_unfinished WHERE run_id = %s", (run_id,))
                if not tombstone:
                    conn.execute("DELETE FROM af_runs WHERE run_id = %s", (run_id,))
                    return freed + len(bytes(row[0]))
                stone = make_tombstone(self._manifest(run_id, bytes(row[0])))
                conn.execute(
                    "UPDATE af_runs SET manifest = %s, version = version + 1, log_start = 0, "
                    "log_end = 0, inbox_end = 0 WHERE run_id = %s",
                    (self.codec.dump_manifest(stone), run_id),
                )
                return freed

        freed: int = await self._db.run("delete run", delete)
        return freed

    async def list_unfinished(self, *, unowned: bool = False) -> list[str]:
        """The index's run ids; ``unowned``: those whose lock no session holds."""
        query = "SELECT run_id FROM af_unfinished"
        if unowned:
            query = (
                f"WITH held AS MATERIALIZED ({HELD_KEYS}) "
                "SELECT u.run_id FROM af_unfinished u LEFT JOIN af_runs r USING (run_id) "
                "WHERE r.lock_key IS NULL OR r.lock_key NOT IN (SELECT * FROM held)"
            )

        def listing(conn: Connection, retried: bool) -> list[str]:
            return [str(r[0]) for r in conn.execute(query)]

        found: list[str] = await self._db.run("list unfinished", listing)
        kept = index_run_ids(found, self._index_location, self._index_warned)
        return [r for r in kept if not (unowned and r in self._owned.leases)]

    def _index_location(self, name: str) -> str:
        return f"{self._place}#af_unfinished/{name}"

    async def unindex(self, run_id: str) -> None:
        """Drop the run from the index."""
        await self._db.run(
            "unindex",
            lambda conn, _: conn.execute("DELETE FROM af_unfinished WHERE run_id = %s", (run_id,)),
        )

    async def reindex(self) -> int:
        """Rebuild the index from every manifest: how many of its rows changed."""
        rows = await self._db.run(
            "reindex", lambda conn, _: conn.execute("SELECT run_id FROM af_unfinished").fetchall()
        )
        before = {str(r[0]) for r in rows}
        manifests = await self.list_runs()
        unfinished = {m.run_id for m in manifests if not m.status.finished and not m.tombstone}
        doomed = sorted(before - unfinished)
        added = sorted(unfinished - before)

        def reset(conn: Connection, retried: bool) -> None:
            with conn.transaction():
                conn.execute("DELETE FROM af_unfinished WHERE run_id = ANY(%s)", (doomed,))
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO af_unfinished (run_id) VALUES (%s) ON CONFLICT DO NOTHING",
                        [(r,) for r in added],
                    )

        await self._db.run("reindex", reset)
        return len(doomed) + len(added)

    def _manifest(self, run_id: str, data: bytes) -> RunManifest:
        return self.codec.load_manifest(data, run_id=run_id, location=self._where(run_id))
