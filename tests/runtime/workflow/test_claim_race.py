"""Two recoverers, one orphan: a run finished while a claim waited is never driven again.

Recoverer B lists the orphan, then its claim is held back (``HeldClaims``)
until recoverer A has recovered and completed the run. B must then see, under
its claim, that the run is no orphan any more: it returns the stored result
and runs nothing. Also: ``recover(run_id)`` on a run a live process owns
raises ``RunLockedError``. On the file store and on a real S3 server.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

import anyio
import msgspec
import pytest

from actorflow import Orchestrator, Request, RunContext, Runtime, RuntimeConfig, Specialist, handler
from actorflow.errors import RunLockedError
from actorflow.runtime.workflow._outcomes import new_manifest
from actorflow.storage import (
    FileStore,
    RetentionPolicy,
    RunStatus,
    S3Store,
    SqliteStore,
    Store,
)
from tests.storage.factories_s3 import open_s3_store
from tests.storage.pg_server import open_pg_store

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from actorflow.storage import Lease

Opened = FileStore | S3Store | SqliteStore

STEPS = 25
EXECUTED: list[int] = []
GATE: list[anyio.Event] = []  # a live run's specialist waits on GATE[0]


class Task(Request[int], frozen=True):
    n: int


class Worker(Specialist):
    __actorflow_name__ = "tests.claim_race.Worker"

    @handler
    async def work(self, task: Task) -> int:
        EXECUTED.append(task.n)
        if GATE:
            await GATE[0].wait()
        return task.n * 2


class Fanout(Orchestrator):
    __actorflow_name__ = "tests.claim_race.Fanout"

    async def run(self, ctx: RunContext, steps: int) -> int:
        worker = await ctx.spawn(Worker, name="worker")
        total = 0
        for n in range(steps):
            total += await ctx.ask(worker, Task(n))
        return total


class HeldClaims:
    """A store whose ``claim`` waits for ``go`` (set by the test) before claiming."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.claiming = anyio.Event()
        self.go = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Say the claim was asked for, wait for ``go``, then claim."""
        self.claiming.set()
        await self.go.wait()
        return await self.inner.claim(run_id, owner)


@pytest.fixture(
    params=["file", "s3", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Opened]:
    """Opens another store (another process, in effect) on one shared location."""
    if request.param == "file":
        return lambda: FileStore(tmp_path / "store")
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "store.db")
    if request.param == "postgres":
        pg = request.getfixturevalue("pg_server")
        schema = pg.schema()
        return lambda: cast("Opened", open_pg_store(pg, schema))
    server = request.getfixturevalue("seaweed_server")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    return lambda: open_s3_store(server, prefix=prefix)


async def make_orphan(open_store: Callable[[], Opened], run_id: str) -> None:
    """A run whose process died before its first step: interrupted, no owner."""
    async with open_store() as store:
        manifest = new_manifest(Fanout, STEPS, run_id=run_id, owner="dead", code_version=None)
        await store.create_run(manifest)
        await store.update_run(
            run_id,
            lambda m: msgspec.structs.replace(m, status=RunStatus.INTERRUPTED, owner=None),
        )


@pytest.mark.parametrize(
    "config",
    [
        RuntimeConfig(retention=RetentionPolicy(delete_completed=True)),
        RuntimeConfig(max_recovery_attempts=1),
    ],
    ids=["delete-completed", "one-recovery-attempt"],
)
async def test_a_run_finished_while_a_claim_waited_is_not_driven_again(
    open_store: Callable[[], Opened], config: RuntimeConfig
) -> None:
    EXECUTED.clear()
    await make_orphan(open_store, "race")
    expected = sum(2 * n for n in range(STEPS))
    results_b: dict[str, Any] = {}
    async with open_store() as store_a, open_store() as inner_b:
        store_b = HeldClaims(inner_b)
        async with (
            Runtime(store=store_b, config=config) as runtime_b,
            anyio.create_task_group() as tg,
        ):

            async def recover_b() -> None:
                results_b.update(await runtime_b.recover())

            tg.start_soon(recover_b)
            await store_b.claiming.wait()  # B listed the orphan and wants it
            async with Runtime(store=store_a, config=config) as runtime_a:
                results_a = await runtime_a.recover()
            store_b.go.set()
        final = await store_a.read_run("race")
    assert results_a == {"race": expected}
    assert sorted(EXECUTED) == list(range(STEPS)), "every step ran once, by A only"
    assert results_b == {"race": expected}, "B reports the stored result"
    assert final.status is RunStatus.COMPLETED, final.error
    assert final.attempt == 1, "B's claim counted no recovery attempt"


async def test_recovering_a_run_a_live_process_owns_by_id_raises_run_locked(
    open_store: Callable[[], Opened],
) -> None:
    EXECUTED.clear()
    GATE.append(anyio.Event())
    try:
        async with (
            open_store() as store_a,
            open_store() as store_b,
            Runtime(store=store_a) as runtime_a,
            Runtime(store=store_b) as runtime_b,
        ):
            handle = await runtime_a.start(Fanout, 1, run_id="owned")
            with pytest.raises(RunLockedError):
                await runtime_b.recover("owned")
            assert await runtime_b.recover() == {}, "recover() skips runs others own"
            GATE[0].set()
            assert await handle.result() == 0
    finally:
        GATE.clear()


async def test_a_store_wrapper_that_delegates_by_getattr_runs_workflows(
    open_store: Callable[[], Opened],
) -> None:
    EXECUTED.clear()
    async with open_store() as inner:
        wrapper = HeldClaims(inner)
        wrapper.go.set()
        async with Runtime(store=wrapper) as runtime:
            assert await runtime.run(Fanout, 3) == 6
