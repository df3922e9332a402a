"""Idle workers are told of work by LISTEN/NOTIFY (``WorkWatch``), not only by their polls."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.runtime import AdoptionPolicy
from actorflow.storage import RunManifest, RunStatus, WorkWatch
from tests.storage.pg_server import open_pg_store

if TYPE_CHECKING:
    from tests.storage.pg_server import PgServer

pytestmark = pytest.mark.postgres

STARTED: dict[int, anyio.Event] = {}
"""An event per input, set as the run of that input starts."""


class Woken(Orchestrator):
    __actorflow_name__ = "tests.pg.Woken"

    async def run(self, ctx: RunContext, n: int) -> int:
        STARTED[n].set()
        return n


def _manifest(run_id: str, status: RunStatus) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="w", input=b"", input_hash="h", status=status)


async def test_a_watch_returns_when_a_run_is_submitted_or_given_up(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    async with open_pg_store(pg_server, schema) as idle, open_pg_store(pg_server, schema) as other:
        assert isinstance(idle, WorkWatch)
        async with idle.watch_work() as watch:
            await other.create_run(_manifest("queued-1", RunStatus.QUEUED))
            with anyio.fail_after(30):
                await watch.changed()
            await other.create_run(_manifest("running-1", RunStatus.RUNNING))
            await other.update_run(
                "running-1", lambda m: msgspec.structs.replace(m, status=RunStatus.INTERRUPTED)
            )
            with anyio.fail_after(30):
                await watch.changed()


async def test_an_idle_worker_starts_a_submitted_run_without_waiting_for_its_poll(
    pg_server: PgServer,
) -> None:
    STARTED.update({1: anyio.Event(), 2: anyio.Event()})
    schema = pg_server.schema()
    # a poll an hour apart: only the store's word can start the second run in time
    slow = AdoptionPolicy(poll_interval=3600.0)
    async with (
        open_pg_store(pg_server, schema) as worker_store,
        open_pg_store(pg_server, schema) as client_store,
        Runtime(store=worker_store, adopt_orphans=slow),
        Runtime(store=client_store) as client,
    ):
        await client.submit(Woken, 1)
        with anyio.fail_after(60):
            await STARTED[1].wait()  # the worker's first look (or the word) started it
        # created after that look listed the store: its poll would be an hour away
        await client.submit(Woken, 2)
        with anyio.fail_after(60):
            await STARTED[2].wait()
