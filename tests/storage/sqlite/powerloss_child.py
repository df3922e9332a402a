"""The child of SqliteStore's power-loss test: one workload, each acknowledgement on stdout.

Run as ``python -m tests.storage.sqlite.powerloss_child <file> <asyncio|trio> <full|normal>``
(under ``strace``, by :mod:`tests.storage.sqlite.test_powerloss`). Once a store
call returns it writes one line to stdout in one ``write``, so the trace
orders it after every file write and sync the call made:

- ``ACK create``: the run exists (durable).
- ``ACK append <position> <n>``: ``record(n)`` is at ``position`` (durable).
- ``ACK blob <n>``: ``blob_data(n)`` is stored (durable: ``put_blob``, or in round
  ``UNSYNCED_BLOB`` ``put_blob_unsynced`` then ``sync_blobs``).
- ``ACK post <n>``: message ``m<n>`` is in the inbox (durable).
- ``ACK snapshot <n> <0|1>``: ``snapshot(n)`` written, durable if ``1``.
- ``ACK synced <n>``: ``sync_snapshots`` made ``snapshot(n)`` durable.
- ``ACK deleted <n>``: ``snapshot(n)`` deleted (not synced: it may come back).
- ``ACK attempt <k>``: the manifest's attempt is ``k`` (durable).
- ``ACK phase end``: the manifest's phase is ``end`` (durable; a second, durable
  ``update_run`` making the change an unsynced one made already).
- ``ACK completed``: the run is completed (durable; as above, after another
  connection made the change unsynced).
- ``ACK pruning``: retention (keep the newest snapshot) is about to start: from
  here on the log may start at the newest snapshot, and the blobs only older
  snapshots referenced may go. Then one more append.
- ``ACK done``: the workload finished and the store is closed.

``normal`` is the test that the check can fail: the store's durable commits
are made with ``synchronous=NORMAL`` (the WAL is written, not synced), which
a power loss must be seen to punish.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import sqlite3
import sys
from typing import Any

import anyio
import msgspec

from actorflow.storage import (
    AgentSnapshot,
    EventRecord,
    RetentionPolicy,
    RunManifest,
    RunStatus,
    Snapshot,
    SqliteStore,
    StateRef,
)

RUN = "run-1"
ROUNDS = 4
APPENDS = 3
"""Concurrent appends per round: they share commits."""
UNSYNCED_BLOB = 2
"""The round whose blob is put without a sync, then synced."""
BIG = 1
"""The round whose blob is bigger than the WAL's checkpoint threshold: a checkpoint, then
the WAL written again from its start, in the middle of the workload."""


def record(n: int) -> EventRecord:
    """The ``n``-th record the workload appends."""
    return EventRecord(kind="tick", data=b"%d|" % n + b"." * (n % 7) * 30)


def blob_data(n: int) -> bytes:
    """The blob of round ``n`` (incompressible and over a MiB in round ``BIG``)."""
    if n == BIG:
        return random.Random(n).randbytes(1_200_000)
    return b"state %d " % n * 40


def snapshot(n: int) -> Snapshot:
    """The snapshot of round ``n``: at the log's end after that round, with its blob."""
    ref = hashlib.sha256(blob_data(n)).hexdigest()
    agent = AgentSnapshot(name="a", type="T", state=StateRef(agent="a", type="T", blob=ref))
    return Snapshot(
        run_id=RUN,
        snapshot_id=f"s{n}",
        position=APPENDS * (n + 1),
        created=1000.0 + n,
        trigger="test",
        agents={"a": agent},
        metrics={"n": float(n)},
    )


def ack(line: str) -> None:
    os.write(1, f"ACK {line}\n".encode())


def _bump(m: RunManifest) -> RunManifest:
    return msgspec.structs.replace(m, attempt=m.attempt + 1)


def _end(m: RunManifest) -> RunManifest:
    return msgspec.structs.replace(m, phase="end")


def _complete(m: RunManifest) -> RunManifest:
    return msgspec.structs.replace(m, status=RunStatus.COMPLETED)


async def workload(path: str) -> None:
    store = SqliteStore(path)
    counter = 0
    attempt = 0

    async def append_one() -> None:
        nonlocal counter
        n = counter
        counter += 1
        end = await store.append(RUN, [record(n)])
        ack(f"append {end - 1} {n}")

    async def post_one(n: int) -> None:
        entry_id = f"m{n}"
        await store.post(RUN, entry_id=entry_id, type="Msg", payload=entry_id.encode())
        ack(f"post {n}")

    try:
        await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
        ack("create")
        for n in range(ROUNDS):
            async with anyio.create_task_group() as tg:  # concurrent appends share a commit
                for _ in range(APPENDS):
                    tg.start_soon(append_one)
                tg.start_soon(post_one, n)
            if n == UNSYNCED_BLOB:
                ref = await store.put_blob_unsynced(RUN, blob_data(n))
                await store.sync_blobs(RUN, [ref])
            else:
                await store.put_blob(RUN, blob_data(n))
            ack(f"blob {n}")
            if n == ROUNDS - 1:  # a run's end: its final snapshot and status in one commit
                info = await store.write_snapshot(snapshot(n), update=_bump)
                attempt += 1
                ack(f"snapshot {n} {int(info.durable)}")
                ack(f"attempt {attempt}")
                await store.update_run(RUN, _end, durable=False)
                # a retried step makes the same change durably: it changes no byte
                # of the file, and must still make what it returns durable
                await store.update_run(RUN, _end)
                ack("phase end")
                other = SqliteStore(path)  # another connection (another process's, say)
                try:
                    await other.update_run(RUN, _complete, durable=False)
                finally:
                    await other.aclose()
                await store.update_run(RUN, _complete)
                ack("completed")
            else:
                info = await store.write_snapshot(snapshot(n))
                ack(f"snapshot {n} {int(info.durable)}")
            if n == 1:
                await store.sync_snapshots(RUN, ["s1"])
                ack("synced 1")
            if n == 2:
                await store.delete_snapshot(RUN, "s0")
                ack("deleted 0")
            if n != ROUNDS - 1:
                await store.update_run(RUN, _bump)
                attempt += 1
                ack(f"attempt {attempt}")
        # retention: the newest snapshot stays (synced first), the others go, the
        # log is cut below it, and the blobs only the others referenced are collected
        ack("pruning")
        await store.prune(RetentionPolicy(keep_last=1))
        await append_one()
    finally:
        await store.aclose()
    ack("done")


class _Unsynced(sqlite3.Connection):
    """A connection whose ``synchronous=FULL`` is ``NORMAL``: durable commits are not synced."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.replace(" ", "").upper() == "PRAGMASYNCHRONOUS=FULL":
            sql = "PRAGMA synchronous = NORMAL"
        return super().execute(sql, *args)


def main() -> None:
    path, backend, mode = sys.argv[1:4]
    if mode == "normal":
        sqlite3.connect = functools.partial(sqlite3.connect, factory=_Unsynced)  # type: ignore[assignment]
    elif mode != "full":
        raise SystemExit(f"mode {mode!r}: full or normal")
    anyio.run(workload, path, backend=backend)


if __name__ == "__main__":
    main()
