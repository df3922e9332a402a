"""Snapshot triggers: which records ask the checkpoint actor for a snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from actorflow import CheckpointTriggers, RuntimeConfig
from actorflow.runtime.workflow._recorder import Recorder
from actorflow.runtime.workflow._replay import Capture, RunView
from actorflow.runtime.workflow._triggers import TriggerPolicy
from actorflow.storage import LogWriter, MemoryStore, StateRef, StepRecord

if TYPE_CHECKING:
    from collections.abc import Callable


class Verdict(msgspec.Struct):
    confidence: float


def recorder(
    triggers: CheckpointTriggers, taken: list[str], clock: Callable[[], float] | None = None
) -> Recorder:
    """A recorder whose triggers fire at once (no ``min_interval``), or by ``clock``."""
    store = MemoryStore()
    if clock is None:
        triggers = msgspec.structs.replace(triggers, min_interval=0.0)

    def request(capture: Capture) -> None:
        taken.append(capture.snapshot.trigger)

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
    if clock is not None:
        rec.triggers = TriggerPolicy(triggers, clock=clock)
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


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_evaluations_makes_one_snapshot() -> None:
    """Eight evaluator replies in quick succession used to make eight snapshots."""
    taken: list[str] = []
    clock = Clock()
    triggers = CheckpointTriggers(every_steps=None, every_seconds=None, min_interval=1.0)
    rec = recorder(triggers, taken, clock)
    clock.now += 5.0
    for n in range(8):
        rec.record(ask("judge", n, Verdict(0.9)))
        clock.now += 0.01
    assert taken == ["evaluation"]


def test_a_trigger_within_the_interval_is_owed_to_the_next_record_after_it() -> None:
    taken: list[str] = []
    clock = Clock()
    triggers = CheckpointTriggers(every_steps=None, every_seconds=None, min_interval=1.0)
    rec = recorder(triggers, taken, clock)
    rec.record(ask("judge", 1, Verdict(0.9)))  # within the interval after the start
    assert taken == []
    clock.now += 0.5
    rec.record(ask("worker", 2))  # fires nothing itself, and the interval is not over
    assert taken == []
    clock.now += 0.6
    rec.record(ask("worker", 3))  # the interval is over: the owed snapshot is taken
    assert taken == ["evaluation"]
    clock.now += 5.0
    rec.record(ask("worker", 4))  # nothing owed any more
    assert taken == ["evaluation"]


def test_manual_and_phase_snapshots_never_wait_and_settle_what_is_owed() -> None:
    taken: list[str] = []
    clock = Clock()
    triggers = CheckpointTriggers(every_steps=None, every_seconds=None, min_interval=1.0)
    rec = recorder(triggers, taken, clock)
    rec.record(ask("judge", 1, Verdict(0.9)))
    rec.snapshot("manual:now")
    clock.now += 2.0
    rec.record(ask("worker", 2))
    assert taken == ["manual:now"], "the manual snapshot covered the owed evaluation"
