"""The determinism guard: clock, randomness and sleep called by orchestrator code outside ``ctx``.

Each watched call is caught in ``strict`` mode (a named error naming the
``ctx`` call to use) and warned about once per call site in ``warn`` mode;
agents, actorflow itself, the standard library and installed packages are
never judged, and nothing stays patched once no guarded run is running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import pytest
import structlog.testing

from actorflow import Orchestrator, Request, RunContext, Runtime, RuntimeConfig, Specialist, handler
from actorflow.errors import ConfigurationError, NondeterministicCallError, RunFailedError
from actorflow.runtime import Determinism
from actorflow.runtime.workflow._determinism import GUARDED
from actorflow.storage import MemoryStore
from actorflow.testing import run_in_memory

if TYPE_CHECKING:
    from collections.abc import Callable

CALLS: dict[str, Callable[[], Any]] = {
    "time.time": lambda: time.time(),
    "time.time_ns": lambda: time.time_ns(),
    "time.monotonic": lambda: time.monotonic(),
    "time.perf_counter": lambda: time.perf_counter(),
    "time.sleep": lambda: time.sleep(0),
    "random.random": lambda: random.random(),
    "random.randint": lambda: random.randint(1, 6),
    "random.choice": lambda: random.choice("abc"),
    "random.shuffle": lambda: random.shuffle([1, 2]),
    "uuid.uuid4": lambda: uuid.uuid4(),
    "uuid.uuid1": lambda: uuid.uuid1(),
    "os.urandom": lambda: os.urandom(4),
    "secrets.token_hex": lambda: secrets.token_hex(4),
    "secrets.randbelow": lambda: secrets.randbelow(10),
}
SLEEPS: dict[str, Callable[[], Any]] = {
    "asyncio.sleep": lambda: asyncio.sleep(0.0001),
    "anyio.sleep": lambda: anyio.sleep(0.0001),
}


class Calls(Orchestrator):
    """Calls what its input names, outside ``ctx``."""

    __actorflow_name__ = "tests.determinism.Calls"

    async def run(self, ctx: RunContext, call: str) -> str:
        if call in SLEEPS:
            if call == "asyncio.sleep" and _backend() != "asyncio":
                return "skipped"
            await SLEEPS[call]()
        else:
            CALLS[call]()
        return "done"


def _backend() -> str:
    import sniffio

    return sniffio.current_async_library()


@pytest.mark.parametrize("call", [*CALLS, *SLEEPS])
async def test_strict_mode_catches_each_watched_call(call: str) -> None:
    config = RuntimeConfig(determinism=Determinism.STRICT)
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        if call == "asyncio.sleep" and _backend() != "asyncio":
            pytest.skip("asyncio.sleep runs on asyncio only")
        with pytest.raises(RunFailedError) as info:
            await runtime.run(Calls, call)
    cause = info.value.__cause__
    assert isinstance(cause, NondeterministicCallError), cause
    assert cause.call == call
    assert cause.site.startswith(__file__)
    assert cause.instead.startswith("await ctx.")


async def test_warn_mode_logs_once_per_call_site_and_the_run_goes_on() -> None:
    async with Runtime(store=MemoryStore()) as runtime:  # warn is the default
        with structlog.testing.capture_logs() as logs:
            assert await runtime.run(Calls, "time.time") == "done"
            assert await runtime.run(Calls, "time.time") == "done"
    warnings = [e for e in logs if e["event"] == "nondeterministic_call"]
    assert len(warnings) <= 1, "once per call site, not per call"
    # the call site may have been warned about by an earlier test of this process
    for warning in warnings:
        assert (warning["call"], warning["instead"]) == ("time.time", "await ctx.now()")
        assert warning["log_level"] == "warning"


class UsesCtx(Orchestrator):
    """Deterministic: every value that differs between runs comes through ``ctx``."""

    __actorflow_name__ = "tests.determinism.UsesCtx"

    async def run(self, ctx: RunContext, _: None) -> float:
        now = await ctx.now()
        await ctx.sleep(0)
        chance = await ctx.random()
        await ctx.uuid()
        logging.getLogger("tests.determinism").debug("the stdlib reads the clock: %s", now)
        return chance


async def test_ctx_calls_and_library_code_are_not_judged() -> None:
    assert 0.0 <= await run_in_memory(UsesCtx, None) < 1.0  # strict in actorflow.testing


class Roll(Request[float], frozen=True):
    pass


class Dice(Specialist):
    __actorflow_name__ = "tests.determinism.Dice"

    async def on_start(self) -> None:
        self.started = time.monotonic()

    @handler
    async def roll(self, _: Roll) -> float:
        await anyio.sleep(0.0001)
        return random.random() + time.time() * 0


class AsksAnAgent(Orchestrator):
    __actorflow_name__ = "tests.determinism.AsksAnAgent"

    async def run(self, ctx: RunContext, _: None) -> float:
        dice = await ctx.spawn(Dice, name="dice")
        rolls = await ctx.gather(ctx.ask(dice, Roll()), ctx.ask(dice, Roll()))
        return sum(rolls)


async def test_agents_are_never_judged() -> None:
    """Agents run live (their replies are recorded): randomness there is fine."""
    assert 0.0 <= await run_in_memory(AsksAnAgent, None) < 2.0


async def test_nothing_stays_patched_after_the_runs() -> None:
    assert await run_in_memory(UsesCtx, None) is not None
    for (module, name), _instead in GUARDED.items():
        assert not hasattr(getattr(module, name), "__actorflow_original__"), name
    assert not hasattr(asyncio.sleep, "__actorflow_original__")


async def test_off_leaves_everything_alone() -> None:
    config = RuntimeConfig(determinism=Determinism.OFF)
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        assert await runtime.run(Calls, "random.random") == "done"


def test_a_mode_that_does_not_exist_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="determinism"):
        RuntimeConfig(determinism="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ACTORFLOW_DETERMINISM"):
        RuntimeConfig.from_env({"ACTORFLOW_DETERMINISM": "sometimes"})
    assert RuntimeConfig.from_env({"ACTORFLOW_DETERMINISM": "Strict"}).determinism == "strict"
