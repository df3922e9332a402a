"""The store side of ``resume`` and ``fork``: answering a pause, copying a run's past."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import ConfigurationError, RunNotFinishedError
from actorflow.runtime.workflow._recorder import encode
from actorflow.runtime.workflow._replay import load_view
from actorflow.storage import AgentSnapshot, RunManifest, RunStatus, StepRecord

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = ["answer_input", "copy_for_fork"]


async def answer_input(store: Store, run_id: str, response: str, prompt: str | None) -> None:
    """Record ``response`` for the run's pending ``wait_for_input`` (the caller owns the run).

    With several requests pending (phases gathered concurrently), the one the
    run reported (``prompt``, as in the manifest) is answered.

    Raises:
        RunNotFinishedError: no input request without an answer is recorded.
    """
    view, _ = await load_view(store, run_id, lambda *a, **k: None)
    waiting = [
        e
        for e in view.events.values()
        if e.kind == "input_requested" and e.step_id is not None and e.step_id not in view.steps
    ]
    if not waiting:
        raise RunNotFinishedError(run_id, "paused, but no unanswered input request is recorded")
    reported = [e for e in waiting if prompt is not None and e.data == prompt.encode()]
    step_id = (reported or waiting)[0].step_id
    assert step_id is not None
    answer = StepRecord(
        step_id=step_id, kind="input", result=encode(response, "input"), time=time.time()
    )
    await store.append(run_id, [answer])


async def copy_for_fork(
    store: Store, source: RunManifest, checkpoint: str, new_id: str
) -> RunManifest:
    """Create run ``new_id`` whose past is ``source``'s up to ``checkpoint``.

    The new run's first snapshot is the old one, its agents' state blobs
    copied under the new run (blobs belong to one run; encrypted ones are
    bound to it). Its log starts empty, right after that snapshot.

    Raises:
        CheckpointNotFoundError: ``source`` has no such checkpoint.
        ConfigurationError: a run with ``new_id`` exists.
    """
    snapshot = await store.read_snapshot(source.run_id, checkpoint)
    now = time.time()
    manifest = RunManifest(
        run_id=new_id,
        workflow=source.workflow,
        input=source.input,
        input_hash=source.input_hash,
        code_version=source.code_version,
        status=RunStatus.INTERRUPTED,
        created=now,
        updated=now,
        parent=source.run_id,
        parent_snapshot=checkpoint,
    )
    stored, created = await store.create_run(manifest)
    if not created:
        raise ConfigurationError("new_run_id", new_id, "an id that no run has yet")
    agents: dict[str, AgentSnapshot] = {}
    for name, agent in snapshot.agents.items():
        ref = agent.state
        if ref is not None and ref.data is None and ref.blob:
            blob = await store.put_blob(new_id, await store.get_blob(source.run_id, ref.blob))
            ref = msgspec.structs.replace(ref, blob=blob)
        agents[name] = msgspec.structs.replace(agent, state=ref)
    await store.write_snapshot(
        msgspec.structs.replace(
            snapshot,
            run_id=new_id,
            snapshot_id=f"0000-fork-of-{snapshot.snapshot_id}",
            position=0,
            agents=agents,
            status=RunStatus.RUNNING,
            trigger="fork",
        )
    )
    return stored
