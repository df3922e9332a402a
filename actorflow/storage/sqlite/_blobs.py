"""A SqliteStore's blobs: content-addressed rows written once, synced on demand.

``blobs`` holds each run's blobs (states, history chunks), sealed. One may be
written without a sync (``durable`` 0, through ``put_blob_unsynced``);
syncing marks it durable in a commit that syncs the WAL, and with it
everything written before. A big blob is sealed in a worker thread, off the
event loop, before its write is queued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.errors import StorageError
from actorflow.storage.file._threads import run_in_thread
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from actorflow.storage._sealing import Codec
    from actorflow.storage.sqlite._runs import Manifests

__all__ = ["BlobRows"]

_SEAL_IN_THREAD = 64 * 1024
"""Blobs bigger than this are sealed in a worker thread before their write is queued."""


class BlobRows:
    """The blob rows of every run in one file."""

    def __init__(self, codec: Codec, location: str, manifests: Manifests) -> None:
        self.codec = codec
        self.location = location
        self._manifests = manifests

    def where(self, run_id: str, address: str) -> str:
        """A blob's row, as errors name it."""
        return row(self.location, "blobs", run_id, "address", address)

    async def seal(self, run_id: str, data: bytes) -> tuple[str, bytes]:
        """The blob's address and sealed bytes (a big one sealed in a worker thread)."""
        if len(data) > _SEAL_IN_THREAD:
            return await run_in_thread(_dump_blob, self.codec, data, run_id)
        return self.codec.dump_blob(data, run_id=run_id)

    def put(
        self, conn: sqlite3.Connection, run_id: str, address: str, sealed: bytes, durable: bool
    ) -> str:
        """Insert the sealed blob unless it is there; mark it durable if ``durable``.

        Raises:
            RunNotFoundError: no such run.
        """
        self._manifests.require(conn, run_id)
        conn.execute(
            "INSERT INTO blobs (run_id, address, durable, data) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id, address) DO UPDATE SET durable = MAX(durable, excluded.durable)",
            (run_id, address, int(durable), sealed),
        )
        return address

    @staticmethod
    def mark_durable(conn: sqlite3.Connection, run_id: str, addresses: Sequence[str]) -> bool:
        """Mark the blobs durable; whether any was not yet.

        Raises:
            StorageError: the run has no such blob.
        """
        pending = False
        for address in addresses:
            found = conn.execute(
                "SELECT durable FROM blobs WHERE run_id = ? AND address = ?", (run_id, address)
            ).fetchone()
            if found is None:
                raise StorageError("sync blobs", f"run {run_id!r} has no blob {address!r}")
            if not found[0]:
                pending = True
                conn.execute(
                    "UPDATE blobs SET durable = 1 WHERE run_id = ? AND address = ?",
                    (run_id, address),
                )
        return pending

    def get(self, conn: sqlite3.Connection, run_id: str, ref: str) -> bytes:
        """The blob, verified and opened.

        Raises:
            StorageError: the run has no such blob.
            RunNotFoundError: no such run.
        """
        found = conn.execute(
            "SELECT data FROM blobs WHERE run_id = ? AND address = ?", (run_id, ref)
        ).fetchone()
        if found is None:
            self._manifests.require(conn, run_id)
            raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}")
        return self.codec.load_blob(
            found[0], run_id=run_id, address=ref, location=self.where(run_id, ref)
        )

    def has(self, conn: sqlite3.Connection, run_id: str, ref: str) -> bool:
        """Whether the run holds the blob.

        Raises:
            RunNotFoundError: no such run.
        """
        found = conn.execute(
            "SELECT 1 FROM blobs WHERE run_id = ? AND address = ?", (run_id, ref)
        ).fetchone()
        if found is None:
            self._manifests.require(conn, run_id)
        return found is not None

    def addresses(self, conn: sqlite3.Connection, run_id: str) -> list[str]:
        """The run's blobs' addresses, sorted.

        Raises:
            RunNotFoundError: no such run.
        """
        self._manifests.require(conn, run_id)
        return [
            r[0]
            for r in conn.execute(
                "SELECT address FROM blobs WHERE run_id = ? ORDER BY address", (run_id,)
            )
        ]

    @staticmethod
    def delete(conn: sqlite3.Connection, run_id: str, ref: str) -> int:
        """Delete the blob if it is there; the bytes freed."""
        found = conn.execute(
            "SELECT length(data) FROM blobs WHERE run_id = ? AND address = ?", (run_id, ref)
        ).fetchone()
        if found is None:
            return 0
        conn.execute("DELETE FROM blobs WHERE run_id = ? AND address = ?", (run_id, ref))
        return int(found[0])


def _dump_blob(codec: Codec, data: bytes, run_id: str) -> tuple[str, bytes]:
    return codec.dump_blob(data, run_id=run_id)
