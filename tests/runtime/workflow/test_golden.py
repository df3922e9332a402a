"""A run recorded by an earlier version, replayed by this one (a golden file).

``golden/pipeline-v1`` is a FileStore holding a `Pipeline` run that crashed
after 20 log records (written by actorflow 0.1.0). Recovering it with today's
code must give the uninterrupted result: step ids, argument hashes, record
and snapshot formats must stay compatible, or runs in flight during an
upgrade would stop with ``NonDeterminismError`` or not load at all.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from actorflow import Runtime
from actorflow.storage import FileStore, RunStatus
from tests.runtime.workflow.workflows import Summary

GOLDEN = Path(__file__).parent / "golden" / "pipeline-v1"


async def test_a_run_recorded_by_version_1_recovers_with_this_code(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    shutil.copytree(GOLDEN, store_dir)
    expected = msgspec.json.decode((GOLDEN / "expected.json").read_bytes(), type=Summary)
    async with Runtime(store=FileStore(store_dir)) as runtime:
        results = await runtime.recover()
        replayed = runtime.handle("golden").replayed_steps
    assert results == {"golden": expected}
    assert replayed == 18, "recovery started from the snapshot at position 2"
    async with FileStore(store_dir) as store:
        assert (await store.read_run("golden")).status is RunStatus.COMPLETED
