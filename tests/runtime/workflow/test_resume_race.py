"""Two processes resume one paused run: the one that loses leaves the live run alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.errors import RunLockedError, RunPaused
from actorflow.storage import MemoryStore, RunManifest, RunStatus

if TYPE_CHECKING:
    from actorflow.storage import Store


class Work(Request[str], frozen=True):
    answer: str


class Worker(Specialist):
    started: anyio.Event | None = None
    go_on: anyio.Event | None = None

    @handler
    async def work(self, work: Work) -> str:
        assert Worker.started is not None
        assert Worker.go_on is not None
        Worker.started.set()
        await Worker.go_on.wait()
        return work.answer


class Asks(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        worker = await ctx.spawn(Worker, name="worker")
        answer = await ctx.wait_for_input("go on?")
        done: str = await ctx.ask(worker, Work(answer))
        return done


class SlowFirstRead:
    """The loser's store: its first manifest read is held back after it read (stale by then)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.read = anyio.Event()
        self.release = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read_run(self, run_id: str) -> RunManifest:
        manifest = await self.inner.read_run(run_id)
        if not self.read.is_set():
            self.read.set()
            await self.release.wait()
        return manifest


async def test_the_losing_resume_never_marks_the_live_run_interrupted() -> None:
    store = MemoryStore()
    Worker.started, Worker.go_on = anyio.Event(), anyio.Event()
    slow = SlowFirstRead(store)
    async with Runtime(store=store) as winner, Runtime(store=slow) as loser:
        with pytest.raises(RunPaused):
            await winner.run(Asks, None, run_id="paused")
        lost = anyio.Event()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:

                async def lose() -> None:
                    with pytest.raises(RunLockedError):  # the winner holds the run
                        await loser.resume("paused", "late")
                    lost.set()

                tg.start_soon(lose)
                await slow.read.wait()  # the loser saw the run paused...
                handle_result: list[str] = []

                async def win() -> None:
                    handle_result.append(await winner.resume("paused", "first"))

                tg.start_soon(win)
                await Worker.started.wait()  # ...and the winner resumed it: it is live
                slow.release.set()
                await lost.wait()
                live = await store.read_run("paused")
                assert live.status is RunStatus.RUNNING, "the live run was marked interrupted"
                assert live.owner == winner.owner
                Worker.go_on.set()
        assert handle_result == ["first"]
