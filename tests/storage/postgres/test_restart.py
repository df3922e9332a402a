"""A run goes on across a crash of the PostgreSQL server (SIGKILL, restart on its data).

Every connection of the owner's store is lost at once: its pool, its lock
connection (the claim) and its listener. The run, waiting for a signal,
takes the signal posted after the restart and finishes; its log holds every
record once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest

from actorflow import Runtime
from actorflow.storage import StepRecord
from tests.runtime.workflow.signal_child import Fix, TwoFixes
from tests.runtime.workflow.test_signals import until_waiting
from tests.storage.pg_server import open_pg_store, running_server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.storage.pg_server import PgServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_server() -> Iterator[PgServer]:
    """A server of this module's own: it is crashed on purpose."""
    with running_server(["-c", "fsync=off"]) as server:
        yield server


async def test_a_run_goes_on_after_the_server_crashes_and_restarts(own_server: PgServer) -> None:
    schema = own_server.schema()
    store = open_pg_store(own_server, schema)
    async with store, Runtime(store=store) as owner:
        handle = await owner.start(TwoFixes, None, run_id="fixes")
        await until_waiting(store, "fixes")
        await owner.signal("fixes", Fix(1))
        await until_waiting(store, "fixes", count=2)
        # the server dies mid-run (no shutdown: its clients see their connections drop)
        await anyio.to_thread.run_sync(lambda: own_server.stop(kill=True))
        await anyio.to_thread.run_sync(own_server.start)
        await owner.signal("fixes", Fix(2))
        with anyio.fail_after(60):
            assert await handle.result() == [1, 2]
        log = await store.read_log("fixes")
        steps = [r.step_id for r in log if isinstance(r, StepRecord)]
        assert len(steps) == len(set(steps))  # nothing recorded twice
        assert (await store.read_claim("fixes")).alive is False  # released at the end
