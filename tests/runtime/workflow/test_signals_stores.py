"""Signals, updates and cancel requests between two store objects on one location.

Each store object stands for a process of its own: on the file store the
owner is woken by a push, on S3 it polls (``inbox_poll_interval``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from actorflow import Runtime
from actorflow.errors import RunFailedError, RunPaused
from actorflow.storage import FileStore, RunStatus, SqliteStore
from tests.runtime.workflow.signal_child import Fix, TwoFixes
from tests.runtime.workflow.test_signals import PausedFix, until_waiting
from tests.runtime.workflow.test_updates import Add, Done, Todo
from tests.storage.factories_s3 import open_s3_store
from tests.storage.pg_server import open_pg_store

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from actorflow.storage import Store


@pytest.fixture(
    params=["file", "s3", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """Opens another store object (another process, in effect) on one location."""
    if request.param == "file":
        return lambda: FileStore(tmp_path / "store")
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "store.db")
    if request.param == "postgres":
        pg = request.getfixturevalue("pg_server")
        schema = pg.schema()
        return lambda: open_pg_store(pg, schema)
    server = request.getfixturevalue("seaweed_server")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    return lambda: open_s3_store(server, prefix=prefix, inbox_poll_interval=0.05)


async def test_signals_updates_and_a_cancel_reach_a_run_another_store_owns(
    open_store: Callable[[], Store],
) -> None:
    owner_store, other_store = open_store(), open_store()
    try:
        async with Runtime(store=owner_store) as owner, Runtime(store=other_store) as other:
            fixes = await owner.start(TwoFixes, None, run_id="fixes")
            await until_waiting(other_store, "fixes")
            await other.signal("fixes", Fix(1))
            await other.signal("fixes", Fix(2))
            assert await fixes.result() == [1, 2]

            todo = await owner.start(Todo, None, run_id="todo")
            assert await other.update("todo", Add("milk"), update_id="u1") == 1
            await other.signal("todo", Done())
            assert await todo.result() == ["milk"]

            cancelled = await owner.start(TwoFixes, None, run_id="cancelled")
            await until_waiting(other_store, "cancelled")
            await other.cancel("cancelled", reason="from elsewhere")
            with pytest.raises(RunFailedError, match="from elsewhere"):
                await cancelled.result()
    finally:
        await owner_store.aclose()
        await other_store.aclose()


async def test_a_paused_run_goes_on_at_recover_with_a_signal_from_elsewhere(
    open_store: Callable[[], Store],
) -> None:
    first, second = open_store(), open_store()
    try:
        async with Runtime(store=first) as runtime:
            with pytest.raises(RunPaused):
                await runtime.run(PausedFix, None, run_id="paused")
        async with Runtime(store=second) as other:
            await other.signal("paused", Fix(9))
        assert (await first.read_run("paused")).status is RunStatus.PAUSED
        async with Runtime(store=first) as runtime:
            assert await runtime.recover() == {"paused": 9}
    finally:
        await first.aclose()
        await second.aclose()
