"""A run whose code no longer replays its log is ``blocked``, not failed: kept with the
divergence and the code_version it was blocked under, skipped by ``recover()`` under
that same code, and continued by compatible code, without redoing recorded steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest
from structlog.testing import capture_logs

from actorflow import Runtime
from actorflow.errors import NonDeterminismError, RunBlockedError, RunFailedError
from actorflow.storage import (
    FileStore,
    MemoryStore,
    RetentionPolicy,
    RunStatus,
    SqliteStore,
    Store,
)
from tests.runtime.workflow import ledger_flow
from tests.runtime.workflow.ledger_flow import CONFIG, ENTRIES, RESULT, WRITTEN, define_ledger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

RUN = "ledger"


@pytest.fixture(autouse=True)
def version_1_after() -> Iterator[None]:
    """Tests deploy other versions of the workflow; the next test finds version 1 again."""
    yield
    define_ledger(1)


@pytest.fixture(params=["memory", "file", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store = (
        SqliteStore(tmp_path / "store.db")
        if request.param == "sqlite"
        else MemoryStore()
        if request.param == "memory"
        else FileStore(tmp_path)
    )
    try:
        yield opened
    finally:
        await opened.aclose()


async def blocked_run(store: Store) -> None:
    """Interrupt run ``RUN`` with version 1, then recover it with version 2 under ``v2``."""
    with capture_logs() as logs:
        error = await ledger_flow.blocked_run(store, RUN, code_version="v2")
    assert isinstance(error, RunBlockedError)
    assert isinstance(error, RunFailedError)  # for code written before blocked runs
    assert isinstance(error.__cause__, NonDeterminismError)
    [event] = [e for e in logs if e["event"] == "run_blocked"]
    assert event["code_version"] == "v2"
    assert event["step_id"] == error.__cause__.step_id


async def test_a_run_whose_code_diverges_is_blocked_with_the_error_and_code_version(
    store: Store,
) -> None:
    await blocked_run(store)
    assert WRITTEN == []  # the divergence was found before anything ran
    manifest = await store.read_run(RUN)
    assert manifest.status is RunStatus.BLOCKED
    assert manifest.blocked_code_version == "v2"
    assert manifest.error is not None
    assert manifest.error.type == "NonDeterminismError"
    assert manifest.attempt == 1
    snapshots = await store.list_snapshots(RUN)
    assert snapshots[-1].trigger == "blocked"
    async with Runtime(store=store, config=CONFIG) as runtime:
        with pytest.raises(RunBlockedError, match="is blocked under code_version 'v2'") as caught:
            await runtime.result(RUN)
        assert "recover" in str(caught.value)
        with pytest.raises(RunBlockedError):  # its id starts nothing new
            await runtime.run(define_ledger(1), ENTRIES, run_id=RUN)
        assert [m.run_id for m in await runtime.runs(status=RunStatus.BLOCKED)] == [RUN]


async def test_recover_under_the_code_version_that_blocked_it_skips_it(store: Store) -> None:
    await blocked_run(store)
    before = await store.read_run(RUN)
    config = msgspec.structs.replace(CONFIG, code_version="v2")
    with capture_logs() as logs:
        async with Runtime(store=store, config=config) as runtime:
            assert await runtime.recover() == {}
    assert await store.read_run(RUN) == before  # not even taken
    [skipped] = [e for e in logs if e["event"] == "run_blocked_skipped"]
    assert skipped["run_id"] == RUN
    assert skipped["code_version"] == "v2"
    assert "NonDeterminismError" not in skipped["error"]  # the message itself
    assert "the log recorded" in skipped["error"]


async def test_compatible_code_under_another_version_continues_it_without_redoing_steps(
    store: Store,
) -> None:
    await blocked_run(store)
    define_ledger(1)  # the rollback
    config = msgspec.structs.replace(CONFIG, code_version="v3")
    async with Runtime(store=store, config=config) as runtime:
        assert await runtime.recover() == {RUN: RESULT}
    # only the entry in flight when the first process stopped, and the one after it
    assert WRITTEN == ["second-2", "second-3"]
    manifest = await store.read_run(RUN)
    assert manifest.status is RunStatus.COMPLETED
    assert (manifest.error, manifest.blocked_code_version) == (None, None)
    assert manifest.attempt == 1  # trying new code is no failed recovery


async def test_a_blocked_run_named_explicitly_is_tried_under_any_code_version(
    store: Store,
) -> None:
    await blocked_run(store)
    define_ledger(1)  # fixed, but deployed without a new code_version
    config = msgspec.structs.replace(CONFIG, code_version="v2")
    async with Runtime(store=store, config=config) as runtime:
        assert await runtime.recover() == {}
        assert await runtime.recover(RUN) == {RUN: RESULT}
    assert WRITTEN == ["second-2", "second-3"]


async def test_code_that_still_diverges_blocks_it_again_under_its_version(store: Store) -> None:
    await blocked_run(store)
    config = msgspec.structs.replace(CONFIG, code_version="v2.1")
    async with Runtime(store=store, config=config) as runtime:
        assert await runtime.recover() == {}
    manifest = await store.read_run(RUN)
    assert (manifest.status, manifest.blocked_code_version) == (RunStatus.BLOCKED, "v2.1")
    assert WRITTEN == []


async def test_retention_never_deletes_a_blocked_run(store: Store) -> None:
    await blocked_run(store)
    report = await store.prune(RetentionPolicy(keep_last=1, delete_completed=True))
    assert report.runs_deleted == 0
    define_ledger(1)
    async with Runtime(store=store, config=CONFIG) as runtime:
        assert await runtime.recover(RUN) == {RUN: RESULT}
