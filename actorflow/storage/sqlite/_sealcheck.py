"""``check_sealed`` for a SqliteStore: every row of one run, verified, nothing decrypted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.storage._capabilities import SealCheck
from actorflow.storage._envelope import Kind
from actorflow.storage.sqlite._schema import row

if TYPE_CHECKING:
    import sqlite3

    from actorflow.storage._sealing import Codec
    from actorflow.storage.sqlite._runs import Manifests

__all__ = ["check_run"]


def check_run(
    conn: sqlite3.Connection, codec: Codec, location: str, manifests: Manifests, run_id: str
) -> SealCheck:
    """Verify the checksum of the run's manifest, claim, records, snapshots, blobs and entries.

    Raises:
        RunNotFoundError: no such run.
    """
    manifests.require(conn, run_id)
    check = SealCheck()
    (data,) = conn.execute("SELECT manifest FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    where = row(location, "runs", run_id)
    check.verify(codec, data, kind=Kind.MANIFEST, part="other", location=where)
    for (data,) in conn.execute("SELECT lease FROM claims WHERE run_id = ?", (run_id,)):
        where = row(location, "claims", run_id)
        check.verify(codec, data, kind=Kind.LEASE, part="other", location=where)
    for position, data in conn.execute(
        "SELECT position, record FROM log WHERE run_id = ? ORDER BY position", (run_id,)
    ):
        where = row(location, "log", run_id, "position", position)
        check.verify(codec, data, kind=Kind.LOG_RECORD, part="records", location=where)
    for snapshot_id, data in conn.execute(
        "SELECT snapshot_id, data FROM snapshots WHERE run_id = ?", (run_id,)
    ):
        where = row(location, "snapshots", run_id, "snapshot_id", snapshot_id)
        check.verify(codec, data, kind=Kind.SNAPSHOT, part="snapshots", location=where)
    for address, data in conn.execute(
        "SELECT address, data FROM blobs WHERE run_id = ?", (run_id,)
    ):
        where = row(location, "blobs", run_id, "address", address)
        check.verify(codec, data, kind=Kind.BLOB, part="blobs", location=where)
    for seq, data in conn.execute(
        "SELECT seq, entry FROM inbox WHERE run_id = ? ORDER BY seq", (run_id,)
    ):
        where = row(location, "inbox", run_id, "seq", seq)
        check.verify(codec, data, kind=Kind.INBOX_ENTRY, part="other", location=where)
    return check
