"""Map-reduce over many specialists: count words of a corpus with eight mappers.

Chunks fan out to the mappers with ``ctx.gather`` (step ids are issued in
argument order, so a replay meets the same ids however the tasks interleave);
one reducer merges the partial counts. Each mapper's state records how many
chunks it handled, and each partial count reaches the log as it completes: a
crash in the middle maps only the chunks that had no record.

Run it with ``python examples/map_reduce.py [STORE]``.
"""

from __future__ import annotations

import collections
import re
import sys
import tempfile

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase

MAPPERS = 8

CORPUS = (
    """
Actors share nothing and talk through messages. A message is handled one at a time.
Messages queue in a mailbox; a bounded mailbox pushes back on senders.
A crash loses nothing that reached the log: the log is replayed and the run goes on.
"""
    * 12
)


class Chunk(Request["Partial"], frozen=True):
    index: int
    text: str


class Partial(msgspec.Struct, frozen=True):
    counts: dict[str, int]


class Merge(Request[list[tuple[str, int]]], frozen=True):
    partials: list[Partial]
    top: int


class MapperState(msgspec.Struct):
    chunks: int = 0
    words: int = 0


class Mapper(Specialist):
    state: MapperState

    @handler
    async def count(self, chunk: Chunk) -> Partial:
        words = re.findall(r"[a-z']+", chunk.text.lower())
        self.state.chunks += 1
        self.state.words += len(words)
        return Partial(dict(collections.Counter(words)))


class Reducer(Specialist):
    @handler
    async def merge(self, msg: Merge) -> list[tuple[str, int]]:
        total: collections.Counter[str] = collections.Counter()
        for partial in msg.partials:
            total.update(partial.counts)
        return sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[: msg.top]


class WordCount(Orchestrator):
    @phase
    async def map(self, ctx: RunContext, lines: list[str]) -> list[Partial]:
        mappers = [await ctx.spawn(Mapper, name=f"mapper-{i}") for i in range(MAPPERS)]
        chunks = [Chunk(i, line) for i, line in enumerate(lines)]
        partials: list[Partial] = await ctx.gather(
            *(ctx.ask(mappers[c.index % MAPPERS], c) for c in chunks)
        )
        return partials

    @phase
    async def reduce(self, ctx: RunContext, partials: list[Partial]) -> list[tuple[str, int]]:
        reducer = await ctx.spawn(Reducer, name="reducer")
        top: list[tuple[str, int]] = await ctx.ask(reducer, Merge(partials, top=5))
        return top

    async def run(self, ctx: RunContext, text: str) -> list[tuple[str, int]]:
        lines = [line for line in text.splitlines() if line.strip()]
        return await self.reduce(ctx, await self.map(ctx, lines))


async def main(store: str) -> list[tuple[str, int]]:
    async with Runtime(store=store) as runtime:
        top: list[tuple[str, int]] = await runtime.run(WordCount, CORPUS)
    return [(word, count) for word, count in top]


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="actorflow-")
    for backend in ("asyncio", "trio"):
        print(backend, anyio.run(main, folder, backend=backend))
