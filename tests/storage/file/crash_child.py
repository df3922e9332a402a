"""The child of the SIGKILL crash tests: writes to a FileStore until it is killed.

Run as ``python -m tests.storage.file.crash_child <folder> <asyncio|trio>``. It
claims the run, then loops: concurrent appends, a blob, a snapshot. After each
acknowledged operation it reports on stdout, one line each:
``L <length>`` (the log is durable through length), ``S <snapshot id>``,
``B <blob address>``. Record ``i`` of the log is always ``record(i)``.
"""

from __future__ import annotations

import sys

import anyio

from actorflow.storage import (
    AgentSnapshot,
    EventRecord,
    FileStore,
    RunManifest,
    Snapshot,
    StateRef,
)

RUN = "crash-run"


def record(position: int) -> EventRecord:
    return EventRecord(kind="tick", data=b"%d|" % position + b"x" * (position % 13) * 20)


def blob_data(position: int) -> bytes:
    return b"state at %d " % position * 100


def report(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(folder: str) -> None:
    store = FileStore(folder, segment_bytes=4096)
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    await store.claim(RUN, "child")
    await store.append(RUN, [])  # opens the log (cutting a torn tail) before the first loop
    length = await store.log_length(RUN)
    report(f"L {length}")
    lock = anyio.Lock()
    while True:

        async def append_next() -> None:
            nonlocal length
            async with lock:  # positions are taken in order; the fsync is still shared
                position = length
                length += 1
            end = await store.append(RUN, [record(position)])
            if end != position + 1:
                raise SystemExit(f"append of {position} ended at {end}")

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(append_next)
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
        report(f"S {snap.snapshot_id}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], backend=sys.argv[2])
