"""The FileStore's worker-thread pool: results, errors, cancellation, many calls, idle exit."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from actorflow.storage.file import _threads
from actorflow.storage.file._threads import MAX_IN_FLIGHT, run_in_thread


async def test_returns_the_result_from_another_thread() -> None:
    here = threading.get_ident()
    ident, total = await run_in_thread(lambda a, b: (threading.get_ident(), a + b), 2, 3)
    assert total == 5
    assert ident != here


async def test_raises_the_call_error_and_stays_usable() -> None:
    def boom() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await run_in_thread(boom)
    assert await run_in_thread(int, "7") == 7


async def test_a_cancelled_caller_waits_for_the_call_to_finish() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []
    seen: list[list[bool | str]] = []

    def slow() -> str:
        started.set()
        release.wait(timeout=30)
        finished.append(True)
        return "done"

    async with anyio.create_task_group() as tg:

        async def caller() -> None:
            try:
                await run_in_thread(slow)
                seen.append(list(finished))  # what the caller saw when it got back
                await anyio.lowlevel.checkpoint()
                seen.append(["past a checkpoint"])  # never: the cancellation still holds
            finally:
                seen.append(["left"])

        tg.start_soon(caller)
        await anyio.to_thread.run_sync(started.wait, 30)
        tg.cancel_scope.cancel()  # the caller is waiting inside run_in_thread
        release.set()
    # the caller came back only after the call had ended, and was then cancelled
    assert seen == [[True], ["left"]]


async def test_more_calls_than_socket_pairs_all_complete() -> None:
    gate = threading.Barrier(MAX_IN_FLIGHT + 1, timeout=30)
    results: list[int] = []

    def wait_for_all(i: int) -> int:
        # the first MAX_IN_FLIGHT calls hold every socket pair until the next
        # one (through anyio.to_thread) arrives too: only then does any finish
        gate.wait()
        return i

    async def one(i: int) -> None:
        results.append(await run_in_thread(wait_for_all, i))

    async with anyio.create_task_group() as tg:
        for i in range(MAX_IN_FLIGHT + 1):
            tg.start_soon(one, i)
    assert sorted(results) == list(range(MAX_IN_FLIGHT + 1))


async def test_idle_threads_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "IDLE_SECONDS", 0.01)
    pool = _threads._Pool()
    monkeypatch.setattr(_threads, "_pool", pool)
    before = set(threading.enumerate())
    assert await run_in_thread(int, "2") == 2
    workers = [t for t in threading.enumerate() if t not in before]
    for worker in workers:
        await anyio.to_thread.run_sync(worker.join, 30)
    assert workers
    assert not any(t.is_alive() for t in workers)
    assert pool._threads == 0
    # a new call after the threads left starts a new one
    assert await run_in_thread(int, "3") == 3
    pool.close_spares()
