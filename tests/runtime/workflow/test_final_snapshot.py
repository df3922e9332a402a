"""A run's final snapshot: written by the run itself when nothing is queued, else in turn."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from actorflow import Runtime
from actorflow.runtime.workflow._checkpointer import Checkpointer, CheckpointQueue
from actorflow.runtime.workflow._replay import RunView
from actorflow.storage import EventRecord, LogWriter, MemoryStore, RunManifest, RunStatus


def completed(m: RunManifest) -> RunManifest:
    return msgspec.structs.replace(m, status=RunStatus.COMPLETED)


async def new_queue(store: MemoryStore, saved: list[str | None]) -> tuple[CheckpointQueue, RunView]:
    manifest = RunManifest(run_id="r", workflow="W", input=b"\xc0", input_hash="h")
    await store.create_run(manifest)

    def emit(event: str, level: str = "info", **data: Any) -> None:
        if event == "checkpoint_saved":
            saved.append(data["trigger"])

    queue = CheckpointQueue(store=store, writer=LogWriter(store, "r", start=0), emit=emit)
    return queue, RunView("r")


async def test_with_nothing_queued_the_run_writes_its_final_snapshot_itself() -> None:
    store, saved, sent = MemoryStore(), list[str | None](), list[object]()
    queue, view = await new_queue(store, saved)
    final = view.snapshot("completed")

    await queue.write_last(final, sent.append, completed)

    assert sent == []  # no trip through the checkpoint actor
    assert saved == ["completed"]
    assert final.snapshot_id in queue.applied
    assert (queue.written, queue.failed) == (1, 0)
    manifest = await store.read_run("r")
    assert manifest.status is RunStatus.COMPLETED
    assert [i.snapshot_id for i in await store.list_snapshots("r")] == [final.snapshot_id]


async def test_a_final_snapshot_waits_behind_one_the_checkpoint_actor_has_queued() -> None:
    store, saved = MemoryStore(), list[str | None]()
    queue, view = await new_queue(store, saved)
    async with Runtime() as runtime:
        actor = await runtime.spawn(Checkpointer, name="checkpointer")
        # a phase end (kept: never replaced by a newer request), then one more record
        earlier = view.snapshot("phase_end")
        view.apply(EventRecord(kind="tick"))
        final = view.snapshot("completed")
        queue.offer(earlier, actor.send_nowait)
        async with anyio.create_task_group() as tg:
            # the actor has the earlier one to write (taken or not yet, whichever
            # way the scheduler went): the final one queues behind it
            tg.start_soon(queue.write_last, final, actor.send_nowait, completed)
        assert saved == ["phase_end", "completed"]  # in the order they were asked for
        assert final.snapshot_id in queue.applied
        assert actor._cell.actor.state.written == 2
    assert (await store.read_run("r")).status is RunStatus.COMPLETED
    listed = [i.snapshot_id for i in await store.list_snapshots("r")]
    assert listed == [earlier.snapshot_id, final.snapshot_id]
