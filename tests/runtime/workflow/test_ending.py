"""What the orchestrator raised decides how its attempt ends (``Outcome.caught``)."""

from __future__ import annotations

from typing import Any

import pytest

from actorflow.errors import (
    ClusterError,
    EncodingError,
    NonDeterminismError,
    RunBlockedError,
    RunFailedError,
    StorageError,
)
from actorflow.runtime.workflow._ending import Outcome
from actorflow.storage import RunStatus

RUN = "run-1"


def _diverged() -> NonDeterminismError:
    return NonDeterminismError(RUN, "0/1", "ask A", "ask B", "flow.py:1")


class _Emits:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


def _caught(exc: Exception, *, interrupting: bool = False) -> tuple[Outcome, bool, _Emits]:
    outcome, emits = Outcome(), _Emits()
    taken = outcome.caught(RUN, exc, interrupting=interrupting, code_version="v2", emit=emits)
    return outcome, taken, emits


def test_an_error_of_the_code_fails_the_run_with_it_as_the_cause() -> None:
    cause = ValueError("no such thing")
    outcome, taken, _ = _caught(cause)
    assert (taken, outcome.status) == (True, RunStatus.FAILED)
    assert isinstance(outcome.error, RunFailedError)
    assert outcome.error.__cause__ is cause


def test_a_value_that_cannot_be_encoded_fails_the_run_though_it_is_a_storage_error() -> None:
    outcome, taken, _ = _caught(EncodingError("result of run run-1", "not msgpack"))
    assert (taken, outcome.status) == (True, RunStatus.FAILED)


@pytest.mark.parametrize(
    "exc", [StorageError("append", "disk full"), ClusterError("ray://head", "no such class")]
)
def test_the_store_or_the_cluster_failing_leaves_the_run_unfinished(exc: Exception) -> None:
    outcome, taken, _ = _caught(exc, interrupting=True)
    assert (taken, outcome.status) == (True, RunStatus.RUNNING)
    assert outcome.error is exc


def test_an_error_while_the_runtime_interrupts_the_run_is_left_to_the_interrupt() -> None:
    outcome, taken, _ = _caught(ValueError("cancelled on the way"), interrupting=True)
    assert not taken
    assert (outcome.status, outcome.error) == (RunStatus.RUNNING, None)


def test_a_divergence_among_others_blocks_the_run_under_the_code_version() -> None:
    diverged = _diverged()
    group = ExceptionGroup("steps", [ValueError("other"), ExceptionGroup("inner", [diverged])])
    outcome, taken, emits = _caught(group)
    assert (taken, outcome.status) == (True, RunStatus.BLOCKED)
    assert outcome.code_version == "v2"
    assert isinstance(outcome.error, RunBlockedError)
    assert outcome.error.__cause__ is diverged
    assert [event for event, _ in emits.events] == ["run_blocked"]
    assert emits.events[0][1]["step_id"] == "0/1"
