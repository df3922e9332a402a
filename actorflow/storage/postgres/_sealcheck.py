"""``check_sealed`` for a PostgresStore: every row of one run, verified, nothing decrypted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from actorflow.errors import RunNotFoundError
from actorflow.storage._capabilities import SealCheck
from actorflow.storage._envelope import Kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._sealing import Codec
    from actorflow.storage.postgres._db import Connection

__all__ = ["check_run"]

_Part: TypeAlias = Literal["records", "snapshots", "blobs", "other"]


def check_run(conn: Connection, codec: Codec, run_id: str, where: Callable[..., str]) -> SealCheck:
    """Verify the checksum of the run's manifest, records, snapshots, blobs and entries.

    Raises:
        RunNotFoundError: no such run.
    """
    row = conn.execute("SELECT manifest FROM af_runs WHERE run_id = %s", (run_id,)).fetchone()
    if row is None:
        raise RunNotFoundError(run_id)
    result = SealCheck()
    result.verify(codec, bytes(row[0]), kind=Kind.MANIFEST, part="other", location=where(run_id))
    parts: list[tuple[str, Kind, _Part]] = [
        ("SELECT position, data FROM af_log WHERE run_id = %s", Kind.LOG_RECORD, "records"),
        (
            "SELECT snapshot_id, data FROM af_snapshots WHERE run_id = %s",
            Kind.SNAPSHOT,
            "snapshots",
        ),
        ("SELECT address, data FROM af_blobs WHERE run_id = %s", Kind.BLOB, "blobs"),
        ("SELECT seq, data FROM af_inbox WHERE run_id = %s", Kind.INBOX_ENTRY, "other"),
    ]
    folders = {
        "records": "log",
        "snapshots": "snapshots",
        "blobs": "blobs",
        "other": "inbox",
    }
    for query, kind, part in parts:
        for name, data in conn.execute(query, (run_id,)):
            location = where(run_id, folders[part], name)
            result.verify(codec, bytes(data), kind=kind, part=part, location=location)
    return result
