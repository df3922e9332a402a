"""Limits: rates over sliding minutes, concurrency caps, tokens, names and values."""

from __future__ import annotations

import anyio
import pytest

from actorflow import (
    Limit,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
)
from actorflow.errors import LimitValueError, RunFailedError, UnknownLimitError
from actorflow.runtime import report
from actorflow.storage import MemoryStore, StepRecord
from actorflow.testing import FakeClock

AGENTS = 8


class Prompt(Request[int], frozen=True):
    n: int
    tokens: int = 0


class Calls:
    """What the handlers saw: start times, tokens, and how many ran at once."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock
        self.starts: list[float] = []
        self.tokens: list[tuple[float, int]] = []
        self.inside = 0
        self.most_inside = 0


calls = Calls()


async def _call(prompt: Prompt, *, yields: int = 0) -> int:
    calls.inside += 1
    calls.most_inside = max(calls.most_inside, calls.inside)
    now = calls.clock.now() if calls.clock is not None else 0.0
    calls.starts.append(now)
    try:
        for _ in range(yields):  # let the other agents' handlers run meanwhile
            await anyio.lowlevel.checkpoint()
        if prompt.tokens:
            report(tokens=prompt.tokens)
            calls.tokens.append((now, prompt.tokens))
        return prompt.n
    finally:
        calls.inside -= 1


class RateLimited(Specialist):
    limit = "openai"

    @handler
    async def call(self, prompt: Prompt) -> int:
        return await _call(prompt)


class Capped(Specialist):
    @handler(limit="db")
    async def call(self, prompt: Prompt) -> int:
        return await _call(prompt, yields=5)


class Metered(Specialist):
    limit = "metered"

    @handler
    async def call(self, prompt: Prompt) -> int:
        return await _call(prompt)


class Unknown(Specialist):
    @handler(limit="nope")
    async def call(self, prompt: Prompt) -> int:
        return prompt.n


class UnknownByClass(Specialist):
    limit = "missing"

    @handler
    async def call(self, prompt: Prompt) -> int:
        return prompt.n


KINDS: dict[str, type[Specialist]] = {
    c.__name__: c for c in (RateLimited, Capped, Metered, Unknown, UnknownByClass)
}


class Fan(Request[list[int]], frozen=True):
    kind: str
    agents: int
    asks: int
    tokens: int = 0


class FanOut(Orchestrator):
    """``asks`` prompts to each of ``agents`` agents, all at once."""

    async def run(self, ctx: RunContext, fan: Fan) -> list[int]:
        agents = [await ctx.spawn(KINDS[fan.kind], name=f"a{i}") for i in range(fan.agents)]
        prompts = [
            ctx.ask(agent, Prompt(n, fan.tokens)) for n in range(fan.asks) for agent in agents
        ]
        return await ctx.gather(*prompts)


def _most_in_a_minute(times: list[float], window: float = 60.0) -> int:
    """The most start times in any half-open window of sixty seconds (or ``window``)."""
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        most = max(most, i - j + 1)
    return most


async def test_a_rate_shared_by_eight_agents_in_four_runs_holds_in_every_minute() -> None:
    global calls
    clock = FakeClock()
    calls = Calls(clock)
    limits = [Limit("openai", per_minute=60)]
    async with Runtime(store=MemoryStore(), limits=limits, clock=clock) as runtime:
        # 4 runs x 2 agents x 125 asks: 1,000 asks, one budget
        handles = [await runtime.start(FanOut, Fan("RateLimited", 2, 125)) for _ in range(4)]
        for handle in handles:
            await handle.result()
        stats = runtime.limit_stats()["openai"]
    assert len(calls.starts) == 1000
    assert _most_in_a_minute(calls.starts) == 60
    assert clock.now() >= 16 * 60.0  # 1,000 asks at 60 a minute: the seventeenth minute
    assert stats.acquired == 1000
    assert stats.waited > 0
    assert stats.wait_seconds > 0
    assert stats.queued == 0
    assert stats.running == 0


async def test_a_concurrency_cap_is_never_exceeded() -> None:
    global calls
    calls = Calls()
    limits = [Limit("db", max_concurrent=3)]
    async with Runtime(store=MemoryStore(), limits=limits) as runtime:
        result = await runtime.run(FanOut, Fan("Capped", AGENTS, 25))
        stats = runtime.limit_stats()["db"]
    assert len(result) == AGENTS * 25
    assert calls.most_inside == 3  # reached, never passed
    assert stats.running == 0
    assert stats.acquired == AGENTS * 25


async def test_without_the_limit_the_same_fan_out_runs_more_at_once() -> None:
    # the audit above means something: unlimited, the handlers overlap further
    global calls
    calls = Calls()
    async with Runtime(store=MemoryStore(), limits=[Limit("db", max_concurrent=1000)]) as runtime:
        await runtime.run(FanOut, Fan("Capped", AGENTS, 5))
    assert calls.most_inside > 3


async def test_tokens_per_minute_count_what_handlers_report() -> None:
    global calls
    clock = FakeClock()
    calls = Calls(clock)
    # tokens count once reported, after the call: one call at a time makes the budget exact
    limits = [Limit("openai", max_concurrent=1, tokens_per_minute=1000)]
    store = MemoryStore()
    async with Runtime(store=store, limits=limits, clock=clock) as runtime:
        await runtime.run(FanOut, Fan("RateLimited", 4, 10, tokens=100), run_id="tok")
    assert len(calls.tokens) == 40
    times = sorted(t for t, _ in calls.tokens)
    # 100 tokens a call, 1000 a minute: ten calls in any sixty seconds
    assert _most_in_a_minute(times) == 10
    asks = [r for r in await store.read_log("tok") if isinstance(r, StepRecord) and r.kind == "ask"]
    assert all(r.metrics["tokens"] == 100 for r in asks)
    assert any(r.metrics.get("limit_wait", 0) > 0 for r in asks)  # waits show per step


class Slow(Request[int], frozen=True):
    hold: float


class OneAtATime(Specialist):
    limit = "gpu"

    @handler
    async def call(self, slow: Slow) -> int:
        await anyio.sleep(slow.hold)
        return 1


class Both(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> list[int]:
        a = await ctx.spawn(OneAtATime, name="a")
        b = await ctx.spawn(OneAtATime, name="b")
        return await ctx.gather(ctx.ask(a, Slow(1.0)), ctx.ask(b, Slow(0.0), timeout=0.5))


async def test_waiting_for_a_limit_is_not_part_of_the_ask_timeout() -> None:
    config = RuntimeConfig(step_retries=0)
    limits = [Limit("gpu", max_concurrent=1)]
    async with Runtime(store=MemoryStore(), config=config, limits=limits) as runtime:
        # b waits a second for a's slot, with a 0.5 s timeout: it still answers
        assert await runtime.run(Both, None) == [1, 1]
        assert runtime.limit_stats()["gpu"].waited == 1


class Ask(Request[int], frozen=True):
    kind: str


class AskOne(Orchestrator):
    async def run(self, ctx: RunContext, ask: Ask) -> int:
        agent = await ctx.spawn(KINDS[ask.kind], name="x")
        return await ctx.ask(agent, Prompt(1))


@pytest.mark.parametrize(("kind", "name"), [("Unknown", "nope"), ("UnknownByClass", "missing")])
async def test_an_undeclared_limit_name_is_refused_when_the_agent_is_spawned(
    kind: str, name: str
) -> None:
    limits = [Limit("openai", per_minute=10), Limit("db", max_concurrent=2)]
    async with Runtime(store=MemoryStore(), limits=limits) as runtime:
        with pytest.raises(RunFailedError) as caught:
            await runtime.run(AskOne, Ask(kind))
    assert isinstance(caught.value.__cause__, UnknownLimitError)
    message = str(caught.value.__cause__)
    assert repr(name) in message
    assert "'db', 'openai'" in message  # the declared ones, to pick from


@pytest.mark.parametrize(
    "make",
    [
        lambda: Limit("x", per_minute=0),
        lambda: Limit("x", per_minute=-5),
        lambda: Limit("x", max_concurrent=0),
        lambda: Limit("x", max_concurrent=1.5),  # type: ignore[arg-type]
        lambda: Limit("x", tokens_per_minute=-1),
        lambda: Limit("x"),
        lambda: Limit("../etc", per_minute=1),
        lambda: Runtime(limits=[Limit("x", per_minute=1), Limit("x", max_concurrent=1)]),
        lambda: Runtime(limits=["openai"]),  # type: ignore[list-item]
    ],
)
def test_bad_limits_are_named_errors_at_declaration(make: object) -> None:
    with pytest.raises(LimitValueError):
        make()  # type: ignore[operator]


async def test_a_replayed_step_never_takes_a_limit() -> None:
    global calls
    calls = Calls()
    store = MemoryStore()
    limits = [Limit("db", max_concurrent=1)]
    async with Runtime(store=store, limits=limits) as runtime:
        await runtime.run(FanOut, Fan("Capped", 2, 3), run_id="done")
    ran = len(calls.starts)
    async with Runtime(store=store, limits=limits) as runtime:
        last = (await store.list_snapshots("done"))[-1].snapshot_id
        forked = await runtime.fork("done", last, new_run_id="again")
        assert await forked.result() == [0, 0, 1, 1, 2, 2]
        assert runtime.limit_stats()["db"].acquired == 0
    assert len(calls.starts) == ran  # every ask replayed from its record
