"""A result or an input msgspec cannot encode: the run fails at once, clearly, for good.

A run whose orchestrator returns something unencodable can never be stored as
completed: it ends ``failed`` at once (in the store too), ``run()`` raises
``RunFailedError`` naming the encoding problem, and ``recover()`` never runs it
again. An input that cannot be encoded is refused by ``start`` with
``EncodingError`` before anything of the run is recorded.
"""

from __future__ import annotations

import pytest

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.errors import EncodingError, RunFailedError, RunNotFoundError
from actorflow.storage import MemoryStore, RunStatus


class Unencodable(Orchestrator):
    __actorflow_name__ = "tests.unencodable.Unencodable"
    runs = 0

    async def run(self, ctx: RunContext, _: None) -> object:
        type(self).runs += 1
        await ctx.now()  # a step, so the run has a log
        return object()


class Echo(Orchestrator):
    __actorflow_name__ = "tests.unencodable.Echo"

    async def run(self, ctx: RunContext, value: object) -> None:
        raise AssertionError("a run with an unencodable input must never start")


async def test_an_unencodable_result_fails_the_run_at_once() -> None:
    store = MemoryStore()
    Unencodable.runs = 0
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunFailedError, match="EncodingError") as info:
            await runtime.run(Unencodable, None, run_id="bad-result")
        [listed] = await runtime.runs()
        assert listed.status is RunStatus.FAILED, f"the run is {listed.status}"
        handle = runtime.handle("bad-result")
        assert handle.done
    cause = info.value.__cause__
    assert isinstance(cause, EncodingError), repr(cause)
    assert "result of run 'bad-result'" in str(cause) or "result" in cause.what
    manifest = await store.read_run("bad-result")
    assert manifest.status is RunStatus.FAILED
    assert manifest.error is not None
    assert manifest.error.type == "EncodingError"
    assert "cannot be encoded" in manifest.error.message
    assert manifest.result is None
    # a new process finds nothing to recover, and the run's outcome stays as stored
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {}
        assert await runtime.recover("bad-result") == {}
        with pytest.raises(RunFailedError, match="EncodingError"):
            await runtime.result("bad-result")
    assert Unencodable.runs == 1, "the failed run ran again"
    assert (await store.read_run("bad-result")).status is RunStatus.FAILED


async def test_an_unencodable_input_is_refused_by_start_and_nothing_is_recorded() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(EncodingError, match="input") as info:
            await runtime.start(Echo, object(), run_id="bad-input")
        assert isinstance(info.value, TypeError), "EncodingError is also a TypeError"
        assert await runtime.runs() == []
        with pytest.raises(RunNotFoundError):
            runtime.handle("bad-input")
    with pytest.raises(RunNotFoundError):
        await store.read_run("bad-input")


async def test_run_with_an_unencodable_input_raises_encoding_error_itself() -> None:
    with pytest.raises(EncodingError, match="input"):
        async with Runtime(store=MemoryStore()) as runtime:
            await runtime.run(Echo, {1, 2, object()}, run_id="bad-input")
