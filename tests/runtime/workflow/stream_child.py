"""The workflow the cross-process stream test runs, and the child program that watches it.

Run as ``python -m tests.runtime.workflow.stream_child <store_dir> <run_id> <backend>``:
follows the run with ``runtime.watch(..., events=True, until="finished")`` and
prints one JSON line per streamed event (``{"position", "agent", "n"}``), per
gap (``{"lost", "count"}``) and one at the end (``{"end": status}``).
"""

from __future__ import annotations

import json
import sys

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.runtime import EmitsLost, EmitStreamed, RunEnded
from actorflow.storage import FileStore

CHILD_TIMEOUT = 60.0


class Token(msgspec.Struct, frozen=True):
    n: int


class StreamGo(msgspec.Struct, frozen=True):
    pass


class Talk(Request[int], frozen=True):
    start: int
    count: int


class Talker(Specialist):
    __actorflow_name__ = "tests.stream.Talker"

    @handler
    async def talk(self, talk: Talk) -> int:
        for n in range(talk.start, talk.start + talk.count):
            self.emit(Token(n))
        return talk.count


class Streamer(Orchestrator):
    """Streams ``half`` tokens (from an agent), waits for ``StreamGo``, streams ``half`` more."""

    __actorflow_name__ = "tests.stream.Streamer"

    async def run(self, ctx: RunContext, half: int) -> int:
        talker = await ctx.spawn(Talker, name="talker")
        said = await ctx.ask(talker, Talk(0, half))
        await ctx.wait_for(StreamGo)
        for n in range(half, 2 * half):
            self.emit(Token(n))
        return said + half


async def main(store_dir: str, run_id: str) -> None:
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(store=FileStore(store_dir)) as runtime:
            watch = runtime.watch(run_id, events=True, poll_interval=0.02, until="finished")
            async for event in watch:
                match event:
                    case EmitStreamed():
                        n = event.decode(Token).n
                        line = {"position": event.position, "agent": event.agent, "n": n}
                    case EmitsLost():
                        line = {"lost": event.position, "count": event.count}
                    case RunEnded():
                        line = {"end": str(event.status)}
                    case _:
                        continue
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], backend=sys.argv[3])
