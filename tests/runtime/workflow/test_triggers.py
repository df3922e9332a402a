"""Snapshot triggers: which records ask the checkpoint actor for a snapshot."""

from __future__ import annotations

from typing import Any

import msgspec

from actorflow import CheckpointTriggers, RuntimeConfig
from actorflow.runtime.workflow._recorder import Recorder
from actorflow.runtime.workflow._replay import RunView
from actorflow.storage import LogWriter, MemoryStore, Snapshot, StateRef, StepRecord


class Verdict(msgspec.Struct):
    confidence: float


def recorder(triggers: CheckpointTriggers, taken: list[str]) -> Recorder:
    store = MemoryStore()

    def request(snapshot: Snapshot) -> None:
        taken.append(snapshot.trigger)

    view = RunView("r")
    rec = Recorder(
        run_id="r",
        store=store,
        writer=LogWriter(store, "r", start=0),
        view=view,
        config=RuntimeConfig(triggers=triggers),
        request_snapshot=request,
        emit=lambda *a, **k: None,
    )
    view.roles.update({"judge": "evaluator", "worker": "specialist"})
    for agent in ("judge", "worker"):
        rec.record(
            StepRecord(
                step_id=f"spawn-{agent}",
                kind="spawn",
                target=agent,
                state=StateRef(agent=agent, type="T", data=b"\xc0"),
            )
        )
    taken.clear()
    view.steps_since_snapshot = 0
    return rec


def ask(target: str, n: int, result: Any = None, error: bool = False) -> StepRecord:
    from actorflow.storage import ErrorInfo

    return StepRecord(
        step_id=str(n),
        kind="ask",
        target=target,
        result=msgspec.msgpack.encode(result),
        error=ErrorInfo(type="E", message="m") if error else None,
    )


def test_every_n_steps_and_errors() -> None:
    taken: list[str] = []
    rec = recorder(CheckpointTriggers(every_steps=3, every_seconds=None), taken)
    for n in range(7):
        rec.record(ask("worker", n))
    rec.record(ask("worker", 8, error=True))
    assert taken == ["steps", "steps", "error"]


def test_confidence_crossing_the_threshold() -> None:
    taken: list[str] = []
    triggers = CheckpointTriggers(
        every_steps=None, every_seconds=None, on_evaluation=False, confidence_threshold=0.75
    )
    rec = recorder(triggers, taken)
    for n, confidence in enumerate([0.5, 0.6, 0.8, 0.9, 0.7]):
        rec.record(ask("judge", n, Verdict(confidence)))
    # the first evaluation sets a confidence, then it crosses up and down
    assert taken == ["confidence", "confidence", "confidence"]
    assert rec.view.agents["judge"].confidence == 0.7


def test_specialist_done_and_evaluation() -> None:
    taken: list[str] = []
    triggers = CheckpointTriggers(every_steps=None, every_seconds=None, on_specialist_done=True)
    rec = recorder(triggers, taken)
    rec.record(ask("worker", 1))
    rec.record(ask("judge", 2, Verdict(0.9)))
    assert taken == ["specialist_done", "evaluation"]


def test_memory_pressure() -> None:
    taken: list[str] = []
    triggers = CheckpointTriggers(every_steps=None, every_seconds=None, memory_bytes=1)
    rec = recorder(triggers, taken)
    for n in range(64):
        rec.record(ask("worker", n))
    assert taken == ["memory"]


def test_manual_checkpoint_is_taken_at_the_current_position() -> None:
    taken: list[str] = []
    rec = recorder(CheckpointTriggers(every_steps=None, every_seconds=None), taken)
    rec.record(ask("worker", 1))
    rec.snapshot("manual:why")
    assert taken == ["manual:why"]
    assert rec.view.position == 3
