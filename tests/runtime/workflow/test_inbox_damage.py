"""A damaged inbox entry blocks nothing (issue 23): the messages after it are taken."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.errors import RunPaused
from actorflow.storage import FileStore, RunStatus
from tests.runtime.workflow.signal_child import Fix

if TYPE_CHECKING:
    from pathlib import Path


class PausedForAFix(Orchestrator):
    __actorflow_name__ = "tests.inbox_damage.PausedForAFix"  # a stored name no other test uses

    async def run(self, ctx: RunContext, _: None) -> int:
        fix = await ctx.wait_for(Fix, pause=True)
        return fix.n


@pytest.mark.timeout(60)
async def test_a_paused_run_takes_the_signal_after_a_damaged_one_at_recover(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(PausedForAFix, None, run_id="paused")
        await runtime.signal("paused", Fix(1))
        entry = tmp_path / "runs" / "paused" / "inbox" / f"{0:020d}.msg"
        data = bytearray(entry.read_bytes())
        data[-1] ^= 0xFF  # a bit flipped on disk
        entry.write_bytes(bytes(data))
        await runtime.signal("paused", Fix(5))
        with capture_logs() as logs:
            assert await runtime.recover() == {"paused": 5}
        assert (await store.read_run("paused")).status is RunStatus.COMPLETED
        assert any(e["event"] == "inbox_entry_damaged" for e in logs)
