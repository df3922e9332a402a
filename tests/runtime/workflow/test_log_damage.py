"""A damaged log record, on a real file store: recovery reads the log only after the
newest checkpoint, so damage before it stops nothing (``validate`` still names it);
damage after it fails the attempt with ``RecoveryFailedError`` naming the cause,
the run left as it was, and the cause kept for the error that ends its retries."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest
from structlog.testing import capture_logs

from actorflow import Runtime
from actorflow.errors import LogCorruptedError, RecoveryFailedError, RunFailedError
from actorflow.storage import FileStore, RunStatus
from tests.runtime.workflow import ledger_flow
from tests.runtime.workflow.ledger_flow import CONFIG, DAMAGE, RESULT, RUN, WRITTEN, damaged_log

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("where", DAMAGE)
async def test_damage_before_the_newest_checkpoint_does_not_stop_recovery(
    tmp_path: Path, where: str
) -> None:
    damaged = await damaged_log(tmp_path, after_checkpoint=-2, where=where)
    store = FileStore(tmp_path)
    try:
        async with Runtime(store=store, config=CONFIG) as runtime:
            assert await runtime.recover() == {RUN: RESULT}
        # only the entry in flight at the stop and the one after it: nothing recorded ran again
        assert WRITTEN == ["second-2", "second-3"]
        assert (await store.read_run(RUN)).status is RunStatus.COMPLETED
        # the damage is still there for whoever reads the whole log (validate)
        with pytest.raises(LogCorruptedError) as caught:
            await store.read_log(RUN)
        assert str(damaged.segment) in caught.value.location
    finally:
        await store.aclose()


async def test_damage_after_the_newest_checkpoint_fails_recovery_with_the_cause(
    tmp_path: Path,
) -> None:
    damaged = await damaged_log(tmp_path, after_checkpoint=1, where="payload")
    store = FileStore(tmp_path)
    try:
        with capture_logs() as logs:
            async with Runtime(store=store, config=CONFIG) as runtime:
                assert await runtime.recover() == {}
                with pytest.raises(RecoveryFailedError) as caught:
                    await runtime.handle(RUN).result()
        cause = caught.value.__cause__
        assert isinstance(cause, LogCorruptedError)
        assert str(damaged.segment) in cause.location
        message = str(caught.value)
        assert "LogCorruptedError" in message
        assert "payload checksum mismatch" in message
        assert "falls back" not in message
        assert WRITTEN == []  # nothing ran on a log it could not read
        [warning] = [e for e in logs if e["event"] == "run_not_recovered"]
        assert "LogCorruptedError" in warning["error"]
        manifest = await store.read_run(RUN)
        assert manifest.status is RunStatus.RUNNING  # left for a later recover()
        assert [e.type for e in manifest.recovery_errors] == ["LogCorruptedError"]
    finally:
        await store.aclose()


async def test_a_run_that_used_up_its_attempts_names_the_last_cause(tmp_path: Path) -> None:
    await damaged_log(tmp_path, after_checkpoint=1, where="frame-header")
    # the record's frame is damaged but its payload is whole: the log can be
    # counted past it, but the record itself cannot be read
    config = msgspec.structs.replace(CONFIG, max_recovery_attempts=1)
    store = FileStore(tmp_path)
    try:
        for _ in range(2):
            async with Runtime(store=store, config=config) as runtime:
                assert await runtime.recover() == {}
        async with Runtime(store=store, config=config) as runtime:
            with pytest.raises(RunFailedError, match="RecoveryFailedError") as caught:
                await runtime.result(RUN)
        assert "1 recovery attempts failed" in str(caught.value)
        assert "the last with LogCorruptedError" in str(caught.value)
        assert "bad frame header" in str(caught.value)
        assert (await store.read_run(RUN)).status is RunStatus.FAILED
    finally:
        await store.aclose()


def test_the_workflow_module_is_the_one_the_cli_loads() -> None:
    assert ledger_flow.make_runtime("unused").config == CONFIG
