"""Two runs written to a real store (a folder, or a ``sqlite:///`` URL) as the engine would."""

from __future__ import annotations

import msgspec

from actorflow.storage import (
    AgentSnapshot,
    Codec,
    DecisionRecord,
    FileStore,
    PhaseEndRecord,
    RunManifest,
    RunStatus,
    Snapshot,
    StateRef,
    StepRecord,
    Store,
    open_store,
)


class Notes(msgspec.Struct):
    seen: list[str] = []
    score: float = 0.0


def _state(agent: str, notes: Notes) -> StateRef:
    return StateRef(agent=agent, type="Notes", data=msgspec.msgpack.encode(notes))


async def populate(path: str | Store, codec: Codec | None = None) -> None:
    """Two runs as the engine writes them: manifest, log, a blob, three checkpoints.

    ``path`` is a store's location (a folder, a URL), or a store (closed after).
    """
    store = open_store(path, codec=codec) if isinstance(path, str) else path
    try:
        for run_id, status in (("run-a", RunStatus.COMPLETED), ("run-b", RunStatus.INTERRUPTED)):
            data = msgspec.msgpack.encode("goal")
            await store.create_run(
                RunManifest(
                    run_id=run_id,
                    workflow="Lead",
                    input=data,
                    input_hash="h",
                    status=status,
                    created=1_700_000_000.0,
                    updated=1_700_000_100.0,
                    phase="review",
                )
            )
        big = msgspec.msgpack.encode(Notes(seen=[f"file-{i}.py" for i in range(50)], score=0.9))
        blob = await store.put_blob("run-a", big)
        step = StepRecord(
            step_id="research.0/0",
            kind="ask",
            target="researcher-0",
            result=msgspec.msgpack.encode({"answer": "A"}),
            state=_state("researcher-0", Notes(seen=["a"])),
        )
        decision = DecisionRecord(
            step_id="review.0/1",
            agent="orchestrator",
            type="revise",
            rationale="too vague",
            confidence=0.4,
            alternatives=("accept",),
        )
        phase_end = PhaseEndRecord(
            phase_id="research.0", name="research", result=msgspec.msgpack.encode([1, 2])
        )
        await store.append("run-a", [step, phase_end, decision])
        first = Snapshot(
            run_id="run-a",
            snapshot_id="0001-research",
            position=1,
            created=1_700_000_010.0,
            trigger="phase_end",
            phase="research",
            agents={
                "researcher-0": AgentSnapshot(
                    name="researcher-0", type="Researcher", state=step.state
                )
            },
            steps=(step,),
            metrics={"steps": 1.0},
        )
        second = msgspec.structs.replace(
            first,
            snapshot_id="0002-review",
            position=3,
            created=1_700_000_020.0,
            phase="review",
            agents={
                "researcher-0": AgentSnapshot(
                    name="researcher-0",
                    type="Researcher",
                    confidence=0.9,
                    state=StateRef(agent="researcher-0", type="Notes", blob=blob),
                ),
                "reviewer": AgentSnapshot(name="reviewer", type="Reviewer"),
            },
            phases={"research.0": phase_end},
            steps=(),
            decisions=(decision,),
            metrics={"steps": 3.0},
        )
        third = msgspec.structs.replace(
            second, snapshot_id="0003-done", position=3, created=1_700_000_030.0, trigger="final"
        )
        for snap in (first, second, third):
            await store.write_snapshot(snap)
    finally:
        await store.aclose()


async def write_orphan_of_an_unknown_workflow(path: str) -> None:
    """An interrupted run whose workflow class no process here defines."""
    store = FileStore(path)
    try:
        await store.create_run(
            RunManifest(
                run_id="orphan",
                workflow="NoSuchWorkflow",
                input=msgspec.msgpack.encode(None),
                input_hash="h",
                status=RunStatus.INTERRUPTED,
                created=1_700_000_000.0,
                updated=1_700_000_000.0,
            )
        )
    finally:
        await store.aclose()
