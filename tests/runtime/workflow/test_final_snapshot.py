"""A run's final snapshot: written by the run itself at once, whatever is queued."""

from __future__ import annotations

from typing import Any

import anyio

from actorflow import Runtime
from actorflow.runtime.workflow._checkpointer import Checkpointer, CheckpointQueue
from actorflow.runtime.workflow._replay import RunView
from actorflow.storage import EventRecord, LogWriter, MemoryStore, RunManifest


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
