"""The statements an owner sends from the event loop's thread (``_direct``), built whole.

Each is one statement, so one implicit transaction and one commit: the
run's row is changed only if it is as this store knows it (its log's end or
version, and the claim's epoch), and every other insert is a data-modifying
``WITH`` part that reads that change, so under another epoch nothing at all
is written. Snapshots and history chunks waiting for the run's next write
(``_deferred``) ride in the same statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from actorflow.storage.postgres._direct import BYTEA, TEXT

if TYPE_CHECKING:
    import uuid

    from actorflow.storage.postgres._deferred import Waiting

__all__ = ["Statement", "append_statement", "update_statement"]

# the listing entry as every other write of the store encodes it
_encode_info = msgspec.msgpack.Encoder().encode


class Statement:
    """A statement's text as it is built, with its parameters and their types."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.params: list[bytes | None] = []
        self.types: list[int] = []
        self.snapshots = 0
        """How many waiting snapshots it carries (see :attr:`inserted`)."""

    def param(self, value: bytes | None, kind: int = TEXT) -> str:
        """``$n`` for a new parameter (text, typed by the cast around it, or bytea)."""
        self.params.append(value)
        self.types.append(kind)
        return f"${len(self.params)}"

    def rows(self, values: list[tuple[bytes | None, ...]], casts: tuple[str, ...]) -> str:
        """A ``VALUES`` list of parameters, each cast to its column's type."""
        listed = []
        for value in values:
            cells = [
                f"{self.param(v, BYTEA if cast == 'bytea' else TEXT)}::{cast}"
                for v, cast in zip(value, casts, strict=True)
            ]
            listed.append(f"({', '.join(cells)})")
        return ", ".join(listed)

    def waiting(self, run_id: str, waiting: Waiting | None, guard: str) -> None:
        """``WITH`` parts inserting the waiting rows, each only if ``guard`` has a row."""
        if waiting is None:
            return
        run = self.param(run_id.encode())
        if waiting.blobs:
            blobs = self.rows(
                [(a.encode(), d) for a, d in waiting.blobs.items()], ("text", "bytea")
            )
            self.parts.append(
                f", b AS (INSERT INTO af_blobs (run_id, address, data) SELECT {run}, v.a, v.d "
                f"FROM {guard}, (VALUES {blobs}) AS v(a, d) ON CONFLICT DO NOTHING)"
            )
        if waiting.snapshots:
            snapshots = self.rows(
                [(i.snapshot_id.encode(), _encode_info(i), d) for i, d in waiting.snapshots],
                ("text", "bytea", "bytea"),
            )
            # listed durable=False although the commit may be synchronous: retention
            # then treats them as it treats every phase's snapshot
            self.parts.append(
                ", s AS (INSERT INTO af_snapshots (run_id, snapshot_id, info, data, durable) "
                f"SELECT {run}, v.i, v.n, v.d, false FROM {guard}, "
                f"(VALUES {snapshots}) AS v(i, n, d) ON CONFLICT DO NOTHING RETURNING 1)"
            )
            self.snapshots = len(waiting.snapshots)

    @property
    def inserted(self) -> str:
        """A value for the answer: how many of its waiting snapshots the statement inserted.

        Fewer than it carries when an id was taken already (``ON CONFLICT DO
        NOTHING``): by the same snapshot, or by another one, which
        :meth:`WaitingRows.carried` then reports.
        """
        return "(SELECT count(*) FROM s)" if self.snapshots else "0"

    @property
    def text(self) -> bytes:
        return "".join(self.parts).encode()


def append_statement(
    run_id: str,
    sealed: list[bytes],
    batch: uuid.UUID,
    start: int,
    epoch: int,
    waiting: Waiting | None,
) -> Statement:
    """The run's row moved on if its end and epoch are as known, the records inserted,
    and ``waiting``'s rows with them; one row returned per record inserted, each
    holding :attr:`Statement.inserted`."""
    st = Statement()
    run = st.param(run_id.encode())
    st.parts.append(
        f"WITH r AS (UPDATE af_runs SET log_end = log_end + {st.param(str(len(sealed)).encode())}"
        f"::bigint WHERE run_id = {run} AND log_end = {st.param(str(start).encode())}::bigint "
        f"AND epoch = {st.param(str(epoch).encode())}::bigint RETURNING 1)"
    )
    st.waiting(run_id, waiting, "r")
    records = st.rows(
        [
            (str(start + i).encode(), str(batch).encode() if i == 0 else None, data)
            for i, data in enumerate(sealed)
        ],
        ("bigint", "uuid", "bytea"),
    )
    st.parts.append(
        " INSERT INTO af_log (run_id, position, batch, data) "
        f"SELECT {run}, t.p, t.b, t.d FROM r, (VALUES {records}) AS t(p, b, d) "
        f"RETURNING {st.inserted}"
    )
    return st


def update_statement(
    run_id: str,
    sealed: bytes,
    version: int,
    epoch: int,
    *,
    ends: bool,
    waiting: Waiting | None,
) -> Statement:
    """The manifest replaced if the row's version and epoch are as read, in a commit that
    does not wait for its WAL flush, ``waiting``'s rows with it; one row: 1 if it was,
    then :attr:`Statement.inserted`."""
    st = Statement()
    run = st.param(run_id.encode())
    st.parts.append(
        f"WITH u AS (UPDATE af_runs SET manifest = {st.param(sealed, BYTEA)}::bytea, "
        f"version = version + 1 WHERE run_id = {run} "
        f"AND version = {st.param(str(version).encode())}::bigint "
        f"AND epoch = {st.param(str(epoch).encode())}::bigint RETURNING 1)"
    )
    if ends:
        st.parts.append(
            f", d AS (DELETE FROM af_unfinished WHERE run_id = {run} AND EXISTS (SELECT 1 FROM u))"
        )
    st.waiting(run_id, waiting, "u")
    st.parts.append(
        " SELECT set_config('synchronous_commit', 'off', true), (SELECT count(*) FROM u), "
        f"{st.inserted}"
    )
    return st
