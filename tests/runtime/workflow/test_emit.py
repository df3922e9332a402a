"""``emit``: agents and the orchestrator stream events to ``handle.events()`` readers."""

from __future__ import annotations

import anyio
import msgspec
from anyio.lowlevel import checkpoint

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.runtime import Emitted, RunEvent
from actorflow.runtime.actors import ActorSystem
from actorflow.storage import MemoryStore

AGENTS = 8
PER_AGENT = 1250  # 10,000 in all


class Token(msgspec.Struct, frozen=True):
    n: int


class Burst(Request[int], frozen=True):
    count: int


class Chatty(Specialist):
    @handler
    async def burst(self, b: Burst) -> int:
        for n in range(b.count):
            self.emit(Token(n))
            if n % 100 == 99:
                await checkpoint()  # let the other agents interleave
        return b.count


class Bursts(Orchestrator):
    async def run(self, ctx: RunContext, per_agent: int) -> int:
        self.emit(Token(-1))  # the orchestrator emits too
        team = [await ctx.spawn(Chatty, name=f"chatty-{i}") for i in range(AGENTS)]
        counts = await ctx.gather(*(ctx.ask(agent, Burst(per_agent)) for agent in team))
        await ctx.emit(Token(-2))  # ctx.emit without durable: the orchestrator's emit
        return sum(counts)


async def test_a_burst_from_eight_agents_reaches_a_reader_in_order_per_agent() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bursts, PER_AGENT)
        seen: dict[str, list[int]] = {}
        lifecycle: list[str] = []
        async with handle.events() as events:
            async for ev in events:
                if isinstance(ev, Emitted):
                    assert isinstance(ev.event, Token)
                    seen.setdefault(ev.agent, []).append(ev.event.n)
                else:
                    lifecycle.append(ev.name)
            assert events.dropped == 0
        assert await handle.result() == AGENTS * PER_AGENT
    assert seen.pop("orchestrator") == [-1, -2]
    assert sorted(seen) == [f"chatty-{i}" for i in range(AGENTS)]
    for tokens in seen.values():
        assert tokens == list(range(PER_AGENT))
    assert lifecycle[0] == "run_started"
    assert lifecycle[-1] == "run_finished"


async def test_events_interleave_lifecycle_and_emits_in_the_order_they_happened() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bursts, 3)
        names = [
            ev.name if isinstance(ev, RunEvent) else f"{ev.agent}:{ev.event.n}"
            async for ev in handle.events()
        ]
    # the first emit comes after the run started, the last before it finished
    assert names.index("run_started") < names.index("orchestrator:-1")
    assert names.index("orchestrator:-2") < names.index("run_finished")
    seqs = [n for n in names if ":" in n]
    assert len(seqs) == 2 + AGENTS * 3


async def test_a_stalled_reader_loses_the_oldest_events_counted_and_never_holds_the_run() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bursts, PER_AGENT)
        # subscribed, never read while the run goes on: the run must end all the same
        stalled = handle.events(lifecycle=False, buffer=100)
        assert await handle.result() == AGENTS * PER_AGENT
        got = [ev async for ev in stalled]
    total = 2 + AGENTS * PER_AGENT
    assert stalled.dropped == total - 100
    assert len(got) == 100
    # what is left is the newest, contiguous: a gap in seq is exactly what was lost
    assert [ev.seq for ev in got] == list(range(total - 100, total))
    assert handle.metrics["events_dropped"] == total - 100


async def test_lifecycle_events_are_never_dropped() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bursts, 50)
        stalled = handle.events(buffer=1)
        everything = handle.events(emits=False)
        await handle.result()
        got = [ev async for ev in stalled]
        lifecycle = [ev async for ev in everything]
    assert [ev for ev in got if isinstance(ev, RunEvent)] == lifecycle
    emits = [ev for ev in got if isinstance(ev, Emitted)]
    assert [ev.seq for ev in emits] == [2 + AGENTS * 50 - 1]  # the newest only


async def test_a_reader_of_lifecycle_events_only_gets_no_emits() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bursts, 5)
        async with handle.events(emits=False) as events:
            kinds = {type(ev) async for ev in events}
    assert kinds == {RunEvent}


async def test_a_late_reader_gets_past_lifecycle_events_but_no_past_emits() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Bursts, 2)
        await handle.result()
        late = [ev async for ev in handle.events()]
        fresh = [ev async for ev in handle.events(replay=False)]
    assert late
    assert all(isinstance(ev, RunEvent) for ev in late)
    assert fresh == []


async def test_a_closed_stream_is_fed_no_more_and_a_waiting_reader_sees_its_end() -> None:
    gate = anyio.Event()

    class Waits(Orchestrator):
        async def run(self, ctx: RunContext, _: None) -> None:
            self.emit(Token(0))
            await gate.wait()
            self.emit(Token(1))

    async with Runtime(store=MemoryStore()) as runtime:
        handle = await runtime.start(Waits)
        events = handle.events(lifecycle=False)
        first = await events.__anext__()
        assert first.seq == 0
        async with anyio.create_task_group() as tg:

            async def read_rest() -> None:
                assert [ev async for ev in events] == []

            tg.start_soon(read_rest)
            await anyio.wait_all_tasks_blocked()
            events.close()  # from another task: the reader's loop ends
        gate.set()
        await handle.result()
        assert events.buffered == 0


class Lone(Specialist):
    @handler
    async def burst(self, b: Burst) -> int:
        for n in range(b.count):
            self.emit(Token(n))
        return b.count


async def test_emit_outside_a_run_does_nothing() -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Lone, name="lone")
        assert await ref.ask(Burst(3)) == 3
    async with Runtime(store=MemoryStore()) as runtime:
        root = await runtime.spawn(Lone, name="root-lone")  # not a run's agent
        assert await root.ask(Burst(3)) == 3
