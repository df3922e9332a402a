"""A run that waits for a person, streams tokens, and takes updates: the inspector's live tests.

    python -m tests.ui.live_app STORE RUN_ID [asyncio|trio]

runs ``Chat`` to its end in this process; ``actorflow ui --app
tests.ui.live_app:make_runtime`` knows its message types.
"""

from __future__ import annotations

import contextlib
import sys

import anyio
import msgspec

from actorflow import Orchestrator, RunContext, Runtime, update
from actorflow.errors import RunPaused


class ChatGo(msgspec.Struct, frozen=True):
    """What the run waits for first: a person's go-ahead, with how many tokens to stream."""

    topic: str
    tokens: int
    loud: bool = False


class ChatFinish(msgspec.Struct, frozen=True):
    """What the run waits for last."""

    verdict: str


class ChatNote(msgspec.Struct, frozen=True):
    text: str


class Chat(Orchestrator):
    @update
    async def note(self, ctx: RunContext, message: ChatNote) -> str:
        return f"noted: {message.text}"

    async def run(self, ctx: RunContext, title: str) -> str:
        go = await ctx.wait_for(ChatGo)
        for i in range(go.tokens):
            word = f"{go.topic.upper() if go.loud else go.topic}-{i} "
            await ctx.emit({"text": word})
        await ctx.now()
        done = await ctx.wait_for(ChatFinish)
        return f"{title}: {done.verdict}"


class Ask(Orchestrator):
    """Pauses for a person's answer (``wait_for_input``): the process that started it can end."""

    async def run(self, ctx: RunContext, question: str) -> str:
        answer = await ctx.wait_for_input(question)
        return f"{question} {answer}"


def make_runtime(store: str = "./.actorflow") -> Runtime:
    return Runtime(store=store)


async def main(store: str, run_id: str) -> None:
    async with make_runtime(store) as runtime:
        if run_id.startswith("ask"):
            with contextlib.suppress(RunPaused):
                await runtime.run(Ask, "ship it?", run_id=run_id)
            return
        await runtime.run(Chat, "chat", run_id=run_id)


if __name__ == "__main__":
    anyio.run(
        main, sys.argv[1], sys.argv[2], backend=sys.argv[3] if len(sys.argv) > 3 else "asyncio"
    )
