"""Cancelling an append on a FileStore: its records are written once or not at all.

``FileStore.append`` finishes once it has queued the records (their positions
are taken), so ``LogWriter`` needs no shield around it on trio; cancelled
before that, it appends nothing and the writer keeps the records.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread
import sniffio

from actorflow.storage import EventRecord, FileStore, LogWriter, OSFileSystem, RunManifest
from actorflow.storage._logwriter import _needs_shield
from actorflow.testing import CrashingStore

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from actorflow.storage import LogRecord

RUN = "cancel"


def rec(i: int) -> EventRecord:
    return EventRecord(kind="step", step_id=f"s{i}", data=b"y" * 30)


class GatedFS(OSFileSystem):
    """The real file system, whose syncs can be held at a gate (in the worker thread)."""

    def __init__(self) -> None:
        self.held = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def _pass(self) -> None:
        if self.held:
            self.entered.set()
            self.gate.wait(timeout=30)

    def sync_data(self, handle: int) -> None:
        self._pass()
        super().sync_data(handle)

    def fsync(self, handle: int) -> None:
        self._pass()
        super().fsync(handle)


async def new_store(path: Path, fs: GatedFS) -> FileStore:
    store = FileStore(path, fs=fs)
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    await store.append(RUN, [rec(0)])  # the log is open and its segment grown
    return store


def on_trio() -> bool:
    return sniffio.current_async_library() == "trio"


async def test_an_append_cancelled_behind_another_is_still_written(tmp_path: Path) -> None:
    fs = GatedFS()
    store = await new_store(tmp_path, fs)
    fs.held = True
    outcome: list[object] = []
    scope = anyio.CancelScope()

    async def second() -> None:
        with scope:
            try:
                outcome.append(await store.append(RUN, [rec(2)]))
            except anyio.get_cancelled_exc_class():
                outcome.append("cancelled")
                raise

    async with anyio.create_task_group() as tg:
        tg.start_soon(store.append, RUN, [rec(1)])
        await anyio.to_thread.run_sync(fs.entered.wait)  # the first is in its fsync
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()  # the second waits behind it, queued
        scope.cancel()
        await anyio.wait_all_tasks_blocked()
        fs.held = False
        fs.gate.set()
    # trio hands the result back and raises at the next checkpoint; asyncio
    # raises where the cancellation landed, once the write is done
    assert outcome == ([3] if on_trio() else ["cancelled"])
    assert await store.read_log(RUN) == [rec(0), rec(1), rec(2)]
    assert await store.append(RUN, [rec(3)]) == 4


async def test_a_flush_cancelled_mid_append_learns_how_it_went(tmp_path: Path) -> None:
    fs = GatedFS()
    store = await new_store(tmp_path, fs)
    writer = LogWriter(store, RUN, start=1)
    writer.add(rec(1))
    fs.held = True
    scope = anyio.CancelScope()

    async def flush() -> None:
        with scope:
            await writer.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(flush)
        await anyio.to_thread.run_sync(fs.entered.wait)
        scope.cancel()
        await anyio.wait_all_tasks_blocked()
        fs.held = False
        fs.gate.set()
    assert writer.durable == 2  # the append finished, and the writer knows it
    writer.add(rec(2))
    await writer.flush()
    assert await store.read_log(RUN) == [rec(0), rec(1), rec(2)]


async def test_a_flush_cancelled_before_the_store_took_the_records_keeps_them(
    tmp_path: Path,
) -> None:
    first = await new_store(tmp_path, GatedFS())
    await first.aclose()
    store = FileStore(tmp_path)  # has not opened the log: it waits for its lock first
    writer = LogWriter(store, RUN, start=1)
    writer.add(rec(1))
    scope = anyio.CancelScope()

    async def flush() -> None:
        with scope:
            await writer.flush()

    await store._logs._lock.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(flush)
        await anyio.wait_all_tasks_blocked()
        scope.cancel()
        await anyio.wait_all_tasks_blocked()
        store._logs._lock.release()
    # on trio nothing was appended and the record stayed buffered; on asyncio
    # the shielded append went on. Either way it is written exactly once.
    assert writer.durable == (1 if on_trio() else 2)
    await writer.flush()
    assert await store.read_log(RUN) == [rec(0), rec(1)]
    assert writer.durable == 2


async def test_only_a_file_store_s_own_append_goes_without_a_shield_and_only_on_trio(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)

    class Subclassed(FileStore):
        async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
            await anyio.lowlevel.checkpoint()
            return await super().append(run_id, records)

    assert _needs_shield(store) is not on_trio()
    assert _needs_shield(Subclassed(tmp_path))  # an override may await anything
    assert _needs_shield(CrashingStore(store, crash_after=10))
