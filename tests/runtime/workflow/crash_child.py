"""The child program of the workflow SIGKILL tests.

Run as ``python -m tests.runtime.workflow.crash_child <store_dir> <run_id> <backend> <mode>``
with mode one of:

- ``start``: run ``CrashPipeline`` on ``AREAS`` under ``run_id``;
- ``start-many``: start 100 runs of ``CrashPipeline`` on ``SMALL``
  (ids ``<run_id>-000`` ...) in one runtime, wait for all of them;
- ``die``: like ``start``, with an area whose analysis SIGKILLs the process;
- ``pause``: run ``CrashApproval`` until it pauses;
- ``resume``: answer the paused run with ``yes`` (``runtime.resume``);
- ``recover``: ``runtime.recover()``.

Every specialist execution is appended to ``<store_dir>.executions`` as
``<pid> <step key>`` with ``os.write`` + fsync, then printed as ``X <key>``.
The child prints ``READY`` once its runtime is open, ``STARTED`` once its
runs are started (in the store), ``S <snapshot id>`` for
each checkpoint a started run saves, and finally ``RESULT <json>``: the
results of the runs it finished, every run's status in the store, and the
recovery events (``checkpoint_corrupted``, ``checkpoint_restored``...) of the
runs it recovered.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import msgspec

from actorflow import Runtime
from actorflow.errors import RunPaused
from actorflow.storage import FileStore, RunStatus, SqliteStore, Store
from tests.runtime.workflow import crash_workflow
from tests.runtime.workflow.crash_workflow import (
    AREAS,
    DIE,
    SMALL,
    CrashApproval,
    CrashPipeline,
)

CHILD_TIMEOUT = 60.0
"""The child gives up on its own after this long (the parent bounds it too)."""

MANY = 100
"""How many concurrent runs ``start-many`` starts."""

RECOVERY_EVENTS = {"checkpoint_corrupted", "checkpoint_restored", "recovery_started"}


def open_crash_store(location: str | os.PathLike[str]) -> Store:
    """The crash tests' store: a SqliteStore for a ``.db`` file, else a FileStore."""
    path = os.fspath(location)
    return SqliteStore(path) if path.endswith(".db") else FileStore(path)


def side_file(store_dir: str) -> str:
    """Where the executions of the children working on ``store_dir`` are written."""
    return store_dir.rstrip("/") + ".executions"


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def install_recorder(store_dir: str) -> None:
    """Make every specialist execution durable in the side file, then print it.

    With ``CRASH_HOLD_AFTER=N`` in the environment the N-th execution never
    finishes: the parent kills the process then, before the run can end.
    """
    fd = os.open(side_file(store_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pid = os.getpid()
    hold_after = int(os.environ.get("CRASH_HOLD_AFTER", "0"))
    count = 0

    def executed(key: str) -> bool:
        nonlocal count
        os.write(fd, f"{pid} {key}\n".encode())
        os.fsync(fd)
        emit(f"X {key}")
        count += 1
        return count == hold_after

    crash_workflow.ON_EXECUTION = executed


def named_many(prefix: str) -> list[str]:
    return [f"{prefix}-{i:03d}" for i in range(MANY)]


async def print_snapshots(handle: Any) -> None:
    async for event in handle.events(emits=False):
        if event.name == "checkpoint_saved":
            emit(f"S {event['snapshot_id']}")


async def start(runtime: Runtime, mode: str, run_id: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    if mode == "start-many":
        handles = []

        async def one(rid: str) -> None:
            handles.append(await runtime.start(CrashPipeline, SMALL, run_id=rid))

        # Started together, so that all are in the store before most of them finish.
        async with anyio.create_task_group() as tg:
            for rid in named_many(run_id):
                tg.start_soon(one, rid)
    else:
        workflow, areas = (CrashApproval, SMALL) if mode == "pause" else (CrashPipeline, AREAS)
        if mode == "die":
            areas = [*AREAS, DIE]
        handles = [await runtime.start(workflow, areas, run_id=run_id)]
    emit("STARTED")
    async with anyio.create_task_group() as tg:
        for handle in handles:
            tg.start_soon(print_snapshots, handle)
        for handle in handles:
            try:
                results[handle.run_id] = await handle.result()
            except RunPaused as paused:
                results[handle.run_id] = {"paused": paused.run_id, "prompt": paused.prompt}
    return results


async def recover(runtime: Runtime) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    results = await runtime.recover()
    events: dict[str, list[dict[str, Any]]] = {}
    for run_id in results:
        seen = events.setdefault(run_id, [])
        async for event in runtime.handle(run_id).events(emits=False):
            if event.name in RECOVERY_EVENTS:
                seen.append({k: v for k, v in event.items() if k != "time"})
    return results, events


async def main(store_dir: str, run_id: str, mode: str) -> None:
    install_recorder(store_dir)
    store = open_crash_store(store_dir)
    events: dict[str, list[dict[str, Any]]] = {}
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(store=store) as runtime:
            emit("READY")
            if mode == "recover":
                results, events = await recover(runtime)
            elif mode == "resume":
                results = {run_id: await runtime.resume(run_id, "yes")}
            else:
                results = await start(runtime, mode, run_id)
            manifests = await runtime.runs()
            statuses = {m.run_id: str(m.status) for m in manifests}
            # a run an earlier child finished just as its kill landed is not
            # recovered again: its stored result is what it ended with
            stored = {
                m.run_id: await runtime.result(m.run_id)
                for m in manifests
                if m.status is RunStatus.COMPLETED
            }
    await store.aclose()
    out = {"results": results, "statuses": statuses, "events": events, "stored": stored}
    emit("RESULT " + msgspec.json.encode(out).decode())


if __name__ == "__main__":
    _, folder, run, backend, how = sys.argv
    anyio.run(main, folder, run, how, backend=backend)
