"""The file store's inbox watch: a FIFO that posts from any process write a byte to.

The conformance suite covers the ``SupportsInboxWatch`` contract; these tests
cover what only a FIFO does: posts from another process, a FIFO left by a
killed watcher, two watchers, the descriptors and the FIFO released, and the
rest of the store (deletion, listing, checks, pruning) untroubled by it.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow.storage import FileStore, RetentionPolicy, RunManifest
from actorflow.storage._inbox_watch import PollingWatch
from actorflow.storage.file._wake import WAKE
from tests.storage.file.simfs import SimFS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT = Path(__file__).resolve().parents[3]
RUN = "run-1"
BOUND = 20.0  # seconds: a child process starts (imports) well within it


def manifest() -> RunManifest:
    return RunManifest(run_id=RUN, workflow="wf", input=b"\x90", input_hash="h")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileStore]:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    yield store
    await store.aclose()


def wake_path(tmp_path: Path) -> Path:
    return tmp_path / "runs" / RUN / WAKE


def child(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.storage.file.watch_child", str(tmp_path), *args]


def open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


async def test_a_post_from_another_process_wakes_the_watcher(
    store: FileStore, tmp_path: Path
) -> None:
    async with store.watch_inbox(RUN) as watch:
        with anyio.fail_after(BOUND):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch.changed)  # waits; the group ends when it returns
                await anyio.run_process(child(tmp_path, "post", "afar"), cwd=ROOT)
    assert [e.entry_id for e in await store.read_inbox(RUN)] == ["afar"]


async def test_a_fifo_left_by_a_killed_watcher_neither_blocks_nor_fails_a_post(
    store: FileStore, tmp_path: Path
) -> None:
    process = await anyio.open_process(child(tmp_path, "watch"), cwd=ROOT)
    try:
        assert process.stdout is not None
        with anyio.fail_after(BOUND):
            assert (await process.stdout.receive()).startswith(b"ready")
        assert stat.S_ISFIFO(wake_path(tmp_path).lstat().st_mode)
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
        await process.aclose()
    assert process.returncode == -signal.SIGKILL
    assert stat.S_ISFIFO(wake_path(tmp_path).lstat().st_mode)  # left behind, no reader
    with anyio.fail_after(BOUND):  # ENXIO: nobody reads it, and the post goes on
        assert (await store.post(RUN, entry_id="m0", type="Msg", payload=b"")).seq == 0
    async with store.watch_inbox(RUN) as watch:  # a new watcher replaces the dead one's FIFO
        await store.post(RUN, entry_id="m1", type="Msg", payload=b"")
        with anyio.fail_after(BOUND):
            await watch.changed()
    assert not wake_path(tmp_path).exists()


async def test_a_leftover_fifo_with_no_reader_does_not_block_a_post(
    store: FileStore, tmp_path: Path
) -> None:
    os.mkfifo(wake_path(tmp_path))
    with anyio.fail_after(BOUND):
        await store.post(RUN, entry_id="m0", type="Msg", payload=b"")
    wake_path(tmp_path).unlink()
    wake_path(tmp_path).write_bytes(b"")  # and a plain file there is never written to
    await store.post(RUN, entry_id="m1", type="Msg", payload=b"")
    assert wake_path(tmp_path).read_bytes() == b""


async def test_leaving_closes_the_descriptors_and_removes_the_fifo(
    store: FileStore, tmp_path: Path
) -> None:
    before = open_fds()
    async with store.watch_inbox(RUN):
        assert stat.S_ISFIFO(wake_path(tmp_path).lstat().st_mode)
        assert len(open_fds() - before) == 1  # open for reading and writing: one descriptor
    assert open_fds() <= before
    assert not wake_path(tmp_path).exists()
    assert [n for n in os.listdir(wake_path(tmp_path).parent) if n.startswith(".")] == []


async def test_a_second_watcher_takes_over_and_the_first_leaving_keeps_its_fifo(
    store: FileStore, tmp_path: Path
) -> None:
    first = store.watch_inbox(RUN)
    await first.__aenter__()
    async with store.watch_inbox(RUN) as second:
        theirs = wake_path(tmp_path).lstat().st_ino
        await first.__aexit__(None, None, None)  # the first leaves while the second watches
        assert wake_path(tmp_path).lstat().st_ino == theirs  # not removed: not its own
        await store.post(RUN, entry_id="m0", type="Msg", payload=b"")
        with anyio.fail_after(BOUND):
            await second.changed()  # the second still gets the wake-up
    assert not wake_path(tmp_path).exists()


async def test_a_closed_watch_refuses_to_wait(store: FileStore) -> None:
    async with store.watch_inbox(RUN) as watch:
        pass
    with pytest.raises(anyio.ClosedResourceError):
        await watch.changed()


async def test_the_store_works_around_a_watched_or_leftover_fifo(
    store: FileStore, tmp_path: Path
) -> None:
    await store.post(RUN, entry_id="m0", type="Msg", payload=b"")
    os.mkfifo(tmp_path / "runs" / RUN / ".tmp-0123456789abcdef")  # a crash before the rename
    async with store.watch_inbox(RUN):
        assert [m.run_id for m in await store.list_runs()] == [RUN]
        assert await store.list_unreadable() == []
        assert (await store.check_sealed(RUN)).problems == []
        await store.delete_run(RUN)  # a tombstone keeps the folder, and the FIFO
        assert (await store.post(RUN, entry_id="m1", type="Msg", payload=b"")).seq == 0
    await store.prune(RetentionPolicy())
    os.mkfifo(wake_path(tmp_path))  # left by a killed watcher
    await store.delete_run(RUN, tombstone=False)
    assert not (tmp_path / "runs" / RUN).exists()
    await store.create_run(manifest())  # the id is free again
    assert [m.run_id for m in await store.list_runs()] == [RUN]


async def test_a_file_layer_without_fifos_makes_a_polling_watch(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "sim", fs=SimFS())
    await store.create_run(manifest())
    async with store.watch_inbox(RUN) as watch:
        assert isinstance(watch, PollingWatch)
        with anyio.fail_after(BOUND):
            await watch.changed()
    await store.aclose()
