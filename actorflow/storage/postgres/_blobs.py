"""A PostgresStore's blobs: ``af_blobs``, (run, address) -> sealed bytes.

Agents' states and a run's history chunks, content-addressed: writing one
twice stores it once. An unsynced one (``durable=False``) commits without a
WAL flush; ``sync`` makes a run's blobs durable with one synchronous commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from actorflow.errors import RunNotFoundError, StorageError
from actorflow.storage._manifests import validate_blob_ref
from actorflow.storage._records import validate_run_id
from actorflow.storage.postgres._inbox import require_run

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection, Database

__all__ = ["BlobRows"]

# module-level: in the class, `list` names its method
_Addresses: TypeAlias = "list[str]"


class BlobRows:
    """The ``af_blobs`` table.

    Args:
        db: the store's connections.
        codec: seals and opens the blobs.
        where: names a run's part in errors (``where(run_id, "blobs", address)``).
    """

    def __init__(self, db: Database, codec: Codec, where: Callable[..., str]) -> None:
        self._db = db
        self.codec = codec
        self._where = where

    async def put(self, run_id: str, data: bytes, *, durable: bool) -> str:
        """Store ``data`` under its address; ``durable``: with the commit's WAL flush."""
        validate_run_id(run_id)

        def put(conn: Connection, retried: bool) -> str:
            address, sealed = self.codec.dump_blob(data, run_id=run_id)
            with conn.transaction():
                if not durable:
                    conn.execute("SET LOCAL synchronous_commit = off")
                row = conn.execute(
                    "INSERT INTO af_blobs (run_id, address, data) SELECT %s, %s, %s "
                    "WHERE EXISTS (SELECT 1 FROM af_runs WHERE run_id = %s) "
                    "ON CONFLICT DO NOTHING RETURNING 1",
                    (run_id, address, sealed, run_id),
                ).fetchone()
                if row is None:
                    require_run(conn, run_id)  # else it was there already
            return address

        address: str = await self._db.run("put blob", put)
        return address

    async def sync(self, run_id: str, addresses: Sequence[str]) -> None:
        """Make the blobs durable: one synchronous commit flushes them.

        Raises:
            StorageError: the run has no such blob.
        """
        validate_run_id(run_id)
        wanted = sorted({validate_blob_ref(a) for a in addresses})
        if not wanted:
            return

        def sync(conn: Connection, retried: bool) -> set[str]:
            with conn.transaction():
                require_run(conn, run_id)
                rows = conn.execute(
                    "SELECT address FROM af_blobs WHERE run_id = %s AND address = ANY(%s)",
                    (run_id, wanted),
                ).fetchall()
                conn.execute("SELECT pg_current_xact_id()")  # a commit record to flush
            return {str(r[0]) for r in rows}

        found: set[str] = await self._db.run("sync blobs", sync)
        missing = [a for a in wanted if a not in found]
        if missing:
            raise StorageError("sync blobs", f"run {run_id!r} has no blob {missing[0]!r}")

    async def get(self, run_id: str, ref: str) -> bytes:
        """The blob's bytes, opened and verified."""
        validate_run_id(run_id)
        validate_blob_ref(ref)

        def get(conn: Connection, retried: bool) -> bytes:
            row = conn.execute(
                "SELECT (SELECT data FROM af_blobs WHERE run_id = %s AND address = %s) "
                "FROM af_runs WHERE run_id = %s",
                (run_id, ref, run_id),
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            if row[0] is None:
                raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}")
            where = self._where(run_id, "blobs", ref)
            return self.codec.load_blob(bytes(row[0]), run_id=run_id, address=ref, location=where)

        data: bytes = await self._db.run("get blob", get)
        return data

    async def has(self, run_id: str, ref: str) -> bool:
        """Whether the run has the blob."""
        validate_run_id(run_id)
        validate_blob_ref(ref)

        def has(conn: Connection, retried: bool) -> bool:
            row = conn.execute(
                "SELECT (SELECT 1 FROM af_blobs WHERE run_id = %s AND address = %s) "
                "FROM af_runs WHERE run_id = %s",
                (run_id, ref, run_id),
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            return row[0] is not None

        found: bool = await self._db.run("has blob", has)
        return found

    async def list(self, run_id: str) -> _Addresses:
        """The run's blob addresses, sorted."""
        validate_run_id(run_id)

        def listing(conn: Connection, retried: bool) -> list[str]:
            require_run(conn, run_id)
            rows = conn.execute(
                "SELECT address FROM af_blobs WHERE run_id = %s ORDER BY address", (run_id,)
            )
            return [str(r[0]) for r in rows]

        addresses: _Addresses = await self._db.run("list blobs", listing)
        return addresses

    async def delete(self, run_id: str, ref: str) -> int:
        """Remove the blob: the bytes freed (0 if it was not there)."""
        validate_run_id(run_id)
        validate_blob_ref(ref)

        def delete(conn: Connection, retried: bool) -> int:
            require_run(conn, run_id)
            row = conn.execute(
                "DELETE FROM af_blobs WHERE run_id = %s AND address = %s "
                "RETURNING octet_length(data)",
                (run_id, ref),
            ).fetchone()
            return int(row[0]) if row is not None else 0

        freed: int = await self._db.run("delete blob", delete)
        return freed
