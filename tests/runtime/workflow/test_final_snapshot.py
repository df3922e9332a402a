"""A run's final snapshot: written by the run itself at once, whatever is queued."""

from __future__ import annotations

from typing import Any

import anyio

from actorflow import Orchestrator, RunContext, Runtime, phase
from actorflow.runtime.workflow._checkpointer import Checkpointer, CheckpointQueue
from actorflow.runtime.workflow._replay import RunView
from actorflow.storage import (
    EventRecord,
    LogWriter,
    MemoryStore,
    RunManifest,
    Snapshot,
    SnapshotInfo,
)


async def new_queue(store: MemoryStore, saved: list[str | None]) -> tuple[CheckpointQueue, RunView]:
    manifest = RunManifest(run_id="r", workflow="W", input=b"\xc0", input_hash="h")
    await store.create_run(manifest)

    def emit(event: str, level: str = "info", **data: Any) -> None:
        if event == "checkpoint_saved":
            saved.append(data["trigger"])

    view = RunView("r")
    queue = CheckpointQueue(
        store=store,
        writer=LogWriter(store, "r", start=0),
        emit=emit,
        journal=view.journal,
        journal_at=view.journal_at,
        history=view.history,
        run_id="r",
    )
    return queue, view


async def test_the_run_writes_its_final_snapshot_itself() -> None:
    store, saved = MemoryStore(), list[str | None]()
    queue, view = await new_queue(store, saved)
    final = view.snapshot("completed")

    await queue.write_final(final)

    assert saved == ["completed"]
    assert (queue.written, queue.failed, queue.queued) == (1, 0, 0)
    assert [i.snapshot_id for i in await store.list_snapshots("r")] == [final.snapshot.snapshot_id]


async def test_the_final_snapshot_supersedes_queued_ones_but_phase_ends_are_still_written() -> None:
    """It used to wait behind every queued snapshot; now the ones it supersedes are
    dropped and the phase ends (kept for fork) are written after the run returned."""
    store, saved = MemoryStore(), list[str | None]()
    queue, view = await new_queue(store, saved)
    async with Runtime() as runtime:
        actor = await runtime.spawn(Checkpointer, name="checkpointer")
        sent: list[object] = []
        # queued while a write is in flight: nothing reaches the actor until we let it
        phase_end = view.snapshot("phase_end")
        view.apply(EventRecord(kind="tick"))
        evaluation = view.snapshot("evaluation")
        view.apply(EventRecord(kind="tick"))
        final = view.snapshot("completed")
        queue.offer(phase_end, sent.append)
        queue.offer(evaluation, sent.append)
        assert queue.queued == 2

        await queue.write_final(final)

        assert saved == ["completed"], "the run did not wait for the queued snapshots"
        assert queue.queued == 1, "the evaluation snapshot was superseded, the phase end kept"
        for message in sent:  # now the checkpoint actor gets to the queue
            actor.send_nowait(message)
        with anyio.fail_after(10):
            await queue.wait_idle()
        assert saved == ["completed", "phase_end"]
    listed = [i.snapshot_id for i in await store.list_snapshots("r")]
    assert listed == [phase_end.snapshot.snapshot_id, final.snapshot.snapshot_id]


class Gated(MemoryStore):
    """A store whose phase-end snapshots wait for ``gate``: the checkpoint actor falls behind."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()

    async def write_snapshot(self, snapshot: Snapshot, **kwargs: Any) -> SnapshotInfo:
        if snapshot.trigger == "phase_end":
            await self.gate.wait()
        return await super().write_snapshot(snapshot, **kwargs)


class ThreeUnits(Orchestrator):
    __actorflow_name__ = "tests.final_snapshot.ThreeUnits"

    @phase
    async def unit(self, ctx: RunContext, k: int) -> int:
        return k

    async def run(self, ctx: RunContext, _: None) -> list[int]:
        return [await self.unit(ctx, k) for k in range(3)]


async def test_a_fork_waits_for_the_phase_ends_still_queued_after_its_run_returned() -> None:
    plain = MemoryStore()
    async with Runtime(store=plain) as runtime:
        await runtime.run(ThreeUnits, None, run_id="units")
    ends = [i.snapshot_id for i in await plain.list_snapshots("units") if i.trigger == "phase_end"]
    store = Gated()
    async with Runtime(store=store) as runtime, anyio.create_task_group() as tg:
        await runtime.run(ThreeUnits, None, run_id="units")
        forked: list[object] = []

        async def fork() -> None:
            handle = await runtime.fork("units", ends[-1], new_run_id="forked")
            forked.append(await handle.result())

        tg.start_soon(fork)
        await anyio.wait_all_tasks_blocked()
        assert forked == [], "the fork read the checkpoints before they were written"
        store.gate.set()
    assert forked == [[0, 1, 2]]


async def test_checkpointed_waits_for_the_phase_ends_queued_after_the_run_returned() -> None:
    plain = MemoryStore()
    async with Runtime(store=plain) as runtime:
        await runtime.run(ThreeUnits, None, run_id="units")
    expected = [i.snapshot_id for i in await plain.list_snapshots("units")]
    store = Gated()
    async with Runtime(store=store) as runtime, anyio.create_task_group() as tg:
        handle = await runtime.start(ThreeUnits, None, run_id="units")
        assert await handle.result() == [0, 1, 2]
        written = anyio.Event()

        async def wait() -> None:
            await handle.checkpointed()
            written.set()

        tg.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        assert not written.is_set(), "the phase ends are still queued"
        store.gate.set()
        await written.wait()
        assert [i.snapshot_id for i in await store.list_snapshots("units")] == expected
