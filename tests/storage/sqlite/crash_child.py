"""The child of SqliteStore's process tests: writes until killed, or races for a claim.

``python -m tests.storage.sqlite.crash_child <file> <asyncio|trio> write`` claims
the run and loops: concurrent appends and posts (sharing commits), a blob, a
snapshot. After each acknowledged operation it reports on stdout, one line
each: ``L <length>`` (the log is durable through length), ``S <snapshot id>``,
``B <blob address>``, ``P <entry id>``. Record ``i`` of the log is always
``record(i)``; a post's id is its message's text.

``... claim <owner>`` prints ``READY``, waits for a line on stdin, then claims
the run once and prints ``WON <epoch>`` or ``LOST``, and holds what it won
until its stdin closes.

``... post <entry id>`` posts one message to the run and exits.
"""

from __future__ import annotations

import sys

import anyio

from actorflow.errors import RunLockedError
from actorflow.storage import AgentSnapshot, RunManifest, Snapshot, SqliteStore, StateRef
from tests.storage.file.crash_child import RUN, blob_data, record, report


async def write(path: str) -> None:
    store = SqliteStore(path)
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    await store.claim(RUN, "child")
    length = await store.log_length(RUN)
    report(f"L {length}")
    lock = anyio.Lock()
    posted = len(await store.read_inbox(RUN))
    while True:

        async def append_next() -> None:
            nonlocal length
            async with lock:  # positions are taken in order; the commit is still shared
                position = length
                length += 1
            end = await store.append(RUN, [record(position)])
            if end != position + 1:
                raise SystemExit(f"append of {position} ended at {end}")

        async def post_next(n: int) -> None:
            entry_id = f"m{n}"
            await store.post(RUN, entry_id=entry_id, type="t", payload=entry_id.encode())
            report(f"P {entry_id}")

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(append_next)
            for n in range(posted, posted + 2):
                tg.start_soon(post_next, n)
        posted += 2
        report(f"L {length}")
        ref = await store.put_blob(RUN, blob_data(length))
        report(f"B {ref}")
        agent = AgentSnapshot(name="a", type="T", state=StateRef(agent="a", type="T", blob=ref))
        snap = Snapshot(
            run_id=RUN,
            snapshot_id=f"p{length}",
            position=length,
            created=float(length),
            trigger="test",
            agents={"a": agent},
        )
        await store.write_snapshot(snap)
        await store.sync_snapshots(RUN, [snap.snapshot_id])
        report(f"S {snap.snapshot_id}")


async def claim(path: str, owner: str) -> None:
    store = SqliteStore(path)
    await store.read_run(RUN)  # the file open: the claims race, not the openings
    report("READY")
    await anyio.to_thread.run_sync(sys.stdin.readline)  # "go", to every child at once
    try:
        lease = await store.claim(RUN, owner)
    except RunLockedError:
        report("LOST")
    else:
        report(f"WON {lease.epoch}")
    await anyio.to_thread.run_sync(sys.stdin.read)  # hold it until the parent lets go
    await store.aclose()


async def post(path: str, entry_id: str) -> None:
    async with SqliteStore(path) as store:
        await store.post(RUN, entry_id=entry_id, type="Msg", payload=b"from afar")


if __name__ == "__main__":
    if sys.argv[3] == "write":
        anyio.run(write, sys.argv[1], backend=sys.argv[2])
    elif sys.argv[3] == "post":
        anyio.run(post, sys.argv[1], sys.argv[4], backend=sys.argv[2])
    else:
        anyio.run(claim, sys.argv[1], sys.argv[4], backend=sys.argv[2])
