"""A run broken outside its orchestrator fails on its own; ``recover()`` still finishes the rest.

A stored input that no longer decodes as the orchestrator's input type (or
any other error outside the orchestrator's code) ends that run ``failed``,
with its cause recorded; ``run()`` and ``result()`` raise ``RunFailedError``
chained to it. ``recover()`` guards every run against any error: it logs it
and recovers the others.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest
from structlog.testing import capture_logs

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.errors import CorruptedDataError, RunFailedError
from actorflow.storage import Lease, MemoryStore, RunStatus

RELEASE: anyio.Event | None = None
"""Set by a test to let ``Waits`` runs finish; unset, they wait forever."""


class Waits(Orchestrator):
    """Returns its input doubled once ``RELEASE`` is set (at once when recovered)."""

    __actorflow_name__ = "tests.broken_runs.Waits"

    async def run(self, ctx: RunContext, n: int) -> int:
        await ctx.now()
        if RELEASE is not None:
            await RELEASE.wait()
        return 2 * n


async def two_orphans(store: MemoryStore) -> None:
    """Runs ``good`` and ``broken``, interrupted as their runtime stopped."""
    global RELEASE  # the module's switch for this test
    RELEASE = anyio.Event()
    try:
        async with Runtime(store=store) as runtime:
            await runtime.start(Waits, 1, run_id="good")
            await runtime.start(Waits, 2, run_id="broken")
            await anyio.wait_all_tasks_blocked()
    finally:
        RELEASE = None
    assert {m.status for m in await store.list_runs()} == {RunStatus.INTERRUPTED}


async def break_input(store: MemoryStore, run_id: str) -> None:
    # a string where the orchestrator takes an int: it no longer decodes
    wrong = msgspec.msgpack.encode("not a number")
    await store.update_run(run_id, lambda m: msgspec.structs.replace(m, input=wrong))


async def test_a_run_whose_input_no_longer_decodes_fails_with_the_cause_recorded() -> None:
    store = MemoryStore()
    await two_orphans(store)
    await break_input(store, "broken")
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunFailedError, match="broken") as caught:
            await runtime.run(Waits, 2, run_id="broken")
        assert isinstance(caught.value.__cause__, CorruptedDataError)
        assert "input of run broken" in str(caught.value.__cause__)
        with pytest.raises(RunFailedError, match="CorruptedDataError"):
            await runtime.result("broken")
    manifest = await store.read_run("broken")
    assert manifest.status is RunStatus.FAILED
    assert manifest.error is not None
    assert manifest.error.type == "CorruptedDataError"
    assert "input of run broken" in manifest.error.message


async def test_recover_fails_the_broken_run_and_finishes_the_other() -> None:
    store = MemoryStore()
    await two_orphans(store)
    await break_input(store, "broken")
    async with Runtime(store=store) as runtime:
        results = await runtime.recover()
    assert results == {"good": 2}
    statuses = {m.run_id: m.status for m in await store.list_runs()}
    assert statuses == {"good": RunStatus.COMPLETED, "broken": RunStatus.FAILED}


class ClaimFails(MemoryStore):
    """Once ``failing``, taking run ``broken`` fails with an error that is no actorflow error."""

    failing = False

    async def claim(self, run_id: str, owner: str) -> Lease:
        if self.failing and run_id == "broken":
            raise RuntimeError("the store's driver broke")
        return await super().claim(run_id, owner)


async def test_an_unexpected_error_recovering_one_run_never_stops_recover_for_the_others() -> None:
    store = ClaimFails()
    await two_orphans(store)
    store.failing = True
    with capture_logs() as logs:
        async with Runtime(store=store) as runtime:
            results = await runtime.recover()
    assert results == {"good": 2}
    [warning] = [e for e in logs if e["event"] == "run_not_recovered"]
    assert warning["run_id"] == "broken"
    assert "RuntimeError: the store's driver broke" in warning["error"]
