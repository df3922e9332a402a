"""The workflows and agents benchmarks/scale.py runs on Ray hosts (imported there by name)."""

from __future__ import annotations

import os
import time

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Specialist, handler
from actorflow.ray import Placement


class Ping(Request[int], frozen=True):
    n: int


class Notes(msgspec.Struct):
    """About 1 KB of state: what a placed agent carries back with every reply."""

    seen: int = 0
    text: str = "x" * 1000


class Pinger(Specialist):
    """A placed agent with ~1 KB of state."""

    placement = Placement(resources={"special": 1})
    state: Notes

    @handler
    async def ping(self, msg: Ping) -> int:
        self.state.seen += 1
        return msg.n


class AskTimes(msgspec.Struct, frozen=True):
    asks: int


class TimedAsks(Orchestrator):
    """Times ``ctx.ask`` to a placed agent from inside a run (each with its durable record)."""

    async def run(self, ctx: RunContext, job: AskTimes) -> list[float]:
        agent = await ctx.spawn(Pinger, name="pinger")
        times = []
        for n in range(job.asks):
            started = time.perf_counter()
            await ctx.ask(agent, Ping(n))
            times.append(time.perf_counter() - started)
        return times


class Saves(Request[list[float]], frozen=True):
    n: int


class Saver(Specialist):
    """Times each ``save_progress`` (a milestone, recorded before it returns) in one task."""

    @handler
    async def save(self, task: Saves) -> list[float]:
        times = []
        for i in range(task.n):
            started = time.perf_counter()
            await self.save_progress(i)
            times.append(time.perf_counter() - started)
        return times


class PlacedSaver(Saver):
    """The same on a placed agent: each milestone goes back to the run's host to be recorded."""

    placement = Placement(resources={"special": 1})


class SaveJob(msgspec.Struct, frozen=True):
    saves: int
    placed: bool


class TimedSaves(Orchestrator):
    """One task that saves ``saves`` milestones, on a local or a placed agent."""

    async def run(self, ctx: RunContext, job: SaveJob) -> list[float]:
        agent = await ctx.spawn(PlacedSaver if job.placed else Saver, name="saver")
        return await ctx.ask(agent, Saves(n=job.saves))


class Tiny(Orchestrator):
    """The smallest run: one recorded step."""

    async def run(self, ctx: RunContext, n: int) -> int:
        await ctx.uuid()
        return n + 1


class Beat(msgspec.Struct, frozen=True):
    steps: int
    side: str
    pause: float


class BeatTask(Request[int], frozen=True):
    n: int
    side: str
    pause: float


class Beater(Specialist):
    """Notes (step key, pid, time) in a side file as each task starts."""

    @handler
    async def beat(self, task: BeatTask) -> int:
        step = self.step
        key = step.key if step is not None else str(task.n)
        fd = os.open(task.side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{key} {os.getpid()} {time.time()}\n".encode())
        finally:
            os.close(fd)
        await anyio.sleep(task.pause)
        return task.n


class Heartbeat(Orchestrator):
    """Asks a local agent ``steps`` times, each task taking ``pause`` seconds."""

    async def run(self, ctx: RunContext, job: Beat) -> int:
        agent = await ctx.spawn(Beater, name="beater")
        total = 0
        for n in range(job.steps):
            total += await ctx.ask(agent, BeatTask(n=n, side=job.side, pause=job.pause))
        return total
