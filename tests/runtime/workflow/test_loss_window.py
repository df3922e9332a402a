"""The loss window of ``batched`` mode: a finished result is durable soon, dependency or not."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import ConfigurationError
from actorflow.runtime import Durability
from actorflow.storage import MemoryStore, StepRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import LogRecord

TASKS = 8
HELD = TASKS - 1  # the one task the test holds back, so the fan-out never completes


class Task(Request[int], frozen=True):
    n: int


class _Gates:
    """Made inside each test's event loop (an anyio.Event belongs to one loop)."""

    held: anyio.Event


GATES = _Gates()


class Slow(Specialist):
    __actorflow_name__ = "tests.loss_window.Slow"

    @handler
    async def work(self, task: Task) -> int:
        if task.n == HELD:
            await GATES.held.wait()
        return task.n * task.n


class FanOut(Orchestrator):
    __actorflow_name__ = "tests.loss_window.FanOut"

    async def run(self, ctx: RunContext, n: int) -> list[int]:
        team = [await ctx.spawn(Slow, name=f"slow-{i}") for i in range(n)]
        return await ctx.gather(*(ctx.ask(team[i], Task(i)) for i in range(n)))


class WatchedStore(MemoryStore):
    """A memory store that tells the test which asks' records reached the log."""

    def __init__(self) -> None:
        super().__init__()
        self.durable_asks: set[str] = set()
        self.changed = anyio.Event()

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        length = await super().append(run_id, records)
        self.durable_asks.update(
            r.step_id for r in records if isinstance(r, StepRecord) and r.kind == "ask"
        )
        self.changed.set()
        self.changed = anyio.Event()
        return length


async def test_finished_asks_become_durable_while_the_fan_out_still_waits() -> None:
    """The issue's shape: most of a phase's asks finished, one still running, and
    nothing depends on the finished ones yet. Before the flush behind, their
    records stayed in memory until the gather returned (a SIGKILL then made
    every finished ask run again)."""
    GATES.held = anyio.Event()
    store = WatchedStore()
    config = RuntimeConfig(flush_delay=0.01)
    async with Runtime(store=store, config=config) as runtime:
        handle = await runtime.start(FanOut, TASKS, run_id="window")
        with anyio.fail_after(30):
            while len(store.durable_asks) < TASKS - 1:
                await store.changed.wait()
        assert not handle.done, "the fan-out is still waiting for the held task"
        GATES.held.set()
        assert await handle.result() == [i * i for i in range(TASKS)]
    assert len(store.durable_asks) == TASKS


@pytest.mark.parametrize("value", [-0.01, float("nan"), "soon", True])
def test_flush_delay_must_be_a_number_of_seconds(value: object) -> None:
    with pytest.raises(ConfigurationError, match="flush_delay"):
        RuntimeConfig(flush_delay=value)  # type: ignore[arg-type]


def test_flush_delay_is_read_from_the_environment() -> None:
    assert RuntimeConfig.from_env({"ACTORFLOW_FLUSH_DELAY": "50ms"}).flush_delay == 0.05
    assert RuntimeConfig().flush_delay == 0.02
    with pytest.raises(ConfigurationError, match="ACTORFLOW_FLUSH_DELAY"):
        RuntimeConfig.from_env({"ACTORFLOW_FLUSH_DELAY": "-1s"})


class Units(Orchestrator):
    """Ten phases of pure work: no step inside any of them (LangGraph's benchmark shape)."""

    __actorflow_name__ = "tests.loss_window.Units"

    @phase
    async def unit(self, ctx: RunContext, k: int, items: list[str]) -> list[str]:
        SEEN.append(len(await SEEN_STORE.read_log(ctx.run_id)))
        return [*items, f"record {k}"]

    async def run(self, ctx: RunContext, n: int) -> list[str]:
        items: list[str] = []
        for k in range(n):
            items = await self.unit(ctx, k, items)
        return items


SEEN: list[int] = []
SEEN_STORE = MemoryStore()


async def test_in_sync_mode_a_phase_end_is_durable_before_the_phase_returns() -> None:
    """A run made of phases alone wrote nothing durable until it ended: a crash at
    unit 5 ran all ten units again."""
    SEEN.clear()
    store = SEEN_STORE
    async with Runtime(store=store, config=RuntimeConfig(durability=Durability.SYNC)) as runtime:
        result = await runtime.run(Units, 4, run_id=f"units-{len(await store.list_runs())}")
    assert result == [f"record {k}" for k in range(4)]
    # each unit sees every earlier unit's end in the log: one durable record more each time
    assert [b - a for a, b in itertools.pairwise(SEEN)] == [1, 1, 1]
