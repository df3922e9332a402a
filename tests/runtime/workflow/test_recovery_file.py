"""Recovery on the file store: a crash at every point of the log, recovered from disk.

The same sweep as ``test_recovery.py`` runs on ``MemoryStore``; here each
crash point gets its own ``FileStore`` folder, so recovery reads back what
the file store wrote (framed log segments, snapshots, manifests, flock
claims released as a dead process's are). ``batched`` is the default and the
mode with the most ways to go wrong (group commit, output barriers); ``sync``
checks that a record on disk before its result is seen recovers the same, and
``phase`` that repeating an open phase after a crash does too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow import RuntimeConfig
from actorflow.storage import FileStore, RunStatus
from actorflow.testing import crash_and_recover, run_in_memory
from tests.runtime.workflow.workflows import AREAS, Pipeline

if TYPE_CHECKING:
    from pathlib import Path

MIN_POINTS = 30
"""The pipeline's log has more records than this: the sweep must try them all."""


@pytest.mark.parametrize("durability", ["batched", "sync", "phase"])
async def test_a_crash_at_every_point_of_the_log_recovers_the_uninterrupted_result_on_disk(
    durability: str, tmp_path: Path
) -> None:
    config = RuntimeConfig.from_env({"ACTORFLOW_DURABILITY": durability})
    expected = await run_in_memory(Pipeline, AREAS, config=config, run_id="crash-test")
    crash_after, points = 1, 0
    while True:
        store = FileStore(tmp_path / f"crash-{crash_after}")
        try:
            outcome = await crash_and_recover(
                Pipeline, AREAS, crash_after=crash_after, config=config, store=store
            )
            if outcome.crashed:
                manifest = await store.read_run("crash-test")
        finally:
            await store.aclose()
        if not outcome.crashed:
            break  # past the end of the log: every point was tried
        assert outcome.expected == expected
        assert outcome.recovered == expected, f"crash after {crash_after} records"
        assert manifest.status is RunStatus.COMPLETED, f"crash after {crash_after} records"
        crash_after, points = crash_after + 1, points + 1
    assert points >= MIN_POINTS
