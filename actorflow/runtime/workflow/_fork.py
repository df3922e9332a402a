"""The store side of ``fork``: a new run whose past is an old run's, up to a snapshot."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import ConfigurationError
from actorflow.runtime.workflow._triggers import Trigger
from actorflow.storage import (
    AgentSnapshot,
    RunManifest,
    RunStatus,
    read_full_snapshot,
    sync_snapshots,
)

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = ["copy_for_fork"]


async def copy_for_fork(
    store: Store, source: RunManifest, checkpoint: str, new_id: str
) -> RunManifest:
    """Create run ``new_id`` whose past is ``source``'s up to ``checkpoint``.

    The new run's first snapshot is the old one, its agents' state blobs
    copied under the new run (blobs belong to one run; encrypted ones are
    bound to it). Its log starts empty, right after that snapshot, which is
    therefore the only copy of the new run's past and is made durable.

    Raises:
        CheckpointNotFoundError: ``source`` has no such checkpoint.
        ConfigurationError: a run with ``new_id`` exists.
    """
    # whole: the new run's history starts with this snapshot (chunks belong to one run)
    snapshot = await read_full_snapshot(store, source.run_id, checkpoint)
    now = time.time()
    manifest = RunManifest(
        run_id=new_id,
        workflow=source.workflow,
        workflow_module=source.workflow_module,
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
    first = await store.write_snapshot(
        msgspec.structs.replace(
            snapshot,
            run_id=new_id,
            snapshot_id=f"0000-fork-of-{snapshot.snapshot_id}",
            position=0,
            agents=agents,
            status=RunStatus.RUNNING,
            trigger=Trigger.FORK,
        )
    )
    await sync_snapshots(store, new_id, [first.snapshot_id])
    return stored
