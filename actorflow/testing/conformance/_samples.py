"""Small records the conformance tests store: manifests, steps, snapshots."""

from __future__ import annotations

from actorflow.storage import (
    AgentSnapshot,
    EventRecord,
    RunManifest,
    Snapshot,
    StateRef,
    StepRecord,
)

__all__ = ["manifest", "snapshot", "step"]


def manifest(run_id: str = "run-1", *, workflow: str = "wf", created: float = 0.0) -> RunManifest:
    """A new run's manifest."""
    return RunManifest(
        run_id=run_id, workflow=workflow, input=b"\x91\x01", input_hash="h", created=created
    )


def step(i: int, blob: str | None = None) -> StepRecord:
    """The ``i``-th step of ``main``, with the agent state in ``blob`` if given."""
    state = StateRef(agent="a", type="T", blob=blob) if blob else None
    return StepRecord(step_id=f"main/{i}", kind="ask", target="a", result=b"r%d" % i, state=state)


def snapshot(
    sid: str,
    position: int,
    *,
    run_id: str = "run-1",
    phase: str | None = None,
    created: float = 1.0,
    blob: str | None = None,
    size: int = 0,
) -> Snapshot:
    """A snapshot at ``position``; ``size`` bytes of padding make it that large."""
    agents = {}
    if blob:
        agents["a"] = AgentSnapshot(
            name="a", type="T", state=StateRef(agent="a", type="T", blob=blob)
        )
    return Snapshot(
        run_id=run_id,
        snapshot_id=sid,
        position=position,
        created=created,
        trigger="test",
        phase=phase,
        agents=agents,
        metrics={"pad": 0.0},
        events=(EventRecord(kind="pad", data=b"x" * size),) if size else (),
    )
