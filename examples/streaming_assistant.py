"""A streaming research assistant: tokens stream to a reader while a second process corrects it.

    python examples/streaming_assistant.py STORE

A writer agent drafts an answer with a (fake) LLM client that yields tokens;
each token is ``self.emit``-ted and printed as it comes, from the run's
``handle.events()``. The orchestrator then waits (durably, up to a minute)
for a ``Correction`` signal. A second process, started by this script,
follows the run with ``runtime.watch``, sees the draft recorded, and sends
the correction with ``runtime.signal``; the run revises the draft (streaming
again) and ends. The file store wakes the run the moment the signal is
stored: no polling.

    python examples/streaming_assistant.py STORE --corrector RUN    # the second process alone
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.runtime import EmitRecorded, Emitted
from actorflow.storage import FileStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class Token(msgspec.Struct, frozen=True):
    text: str


class Drafted(msgspec.Struct, frozen=True):
    words: int


class Correction(msgspec.Struct, frozen=True):
    __actorflow_name__ = "examples.Correction"
    text: str


class Write(Request[str], frozen=True):
    prompt: str


class FakeLLM:
    """Stands in for a model client whose ``stream`` yields tokens as they are generated."""

    async def stream(self, prompt: str) -> AsyncIterator[str]:
        for word in f"Tides follow the moon; {prompt}.".split():
            await anyio.sleep(0.01)  # a token every 10 ms, as a model would
            yield word + " "


class Writer(Specialist):
    __actorflow_name__ = "examples.Writer"

    @handler
    async def write(self, task: Write) -> str:
        text = ""
        async for token in FakeLLM().stream(task.prompt):
            self.emit(Token(token))  # streamed to readers, never recorded
            text += token
        return text.strip()


class Assistant(Orchestrator):
    __actorflow_name__ = "examples.Assistant"

    async def run(self, ctx: RunContext, question: str) -> str:
        writer = await ctx.spawn(Writer, name="writer")
        draft = await ctx.ask(writer, Write(question))
        await ctx.emit(Drafted(len(draft.split())), durable=True)  # other processes see it
        fix = await ctx.wait_for(Correction, timeout=60, default=None)
        if fix is None:
            return draft
        return await ctx.ask(writer, Write(f"{question}, {fix.text}"))


async def correct(store: str, run_id: str) -> None:
    """The second process: follow the run until its draft is recorded, then correct it."""
    async with Runtime(store=FileStore(store)) as runtime:
        async for event in runtime.watch(run_id, poll_interval=0.02):
            if isinstance(event, EmitRecorded) and event.type == "Drafted":
                print(f"[corrector] saw a draft of {event.decode(Drafted).words} words")
                await runtime.signal(run_id, Correction("cite the 2024 survey"), id="fix-1")
                print("[corrector] sent a correction")
                return


async def main(store: str) -> None:
    run_id = "tides"
    async with Runtime(store=FileStore(store)) as runtime:
        handle = await runtime.start(Assistant, "why are there two tides a day", run_id=run_id)
        corrector = subprocess.Popen(  # noqa: ASYNC220 (it runs beside us; waited for below)
            [sys.executable, __file__, store, "--corrector", run_id],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        async with handle.events() as events:
            async for event in events:
                if isinstance(event, Emitted) and isinstance(event.event, Token):
                    print(event.event.text, end="", flush=True)
                elif not isinstance(event, Emitted) and event.name == "run_started":
                    print("[assistant] ", end="")
        print()
        print(f"[assistant] final: {await handle.result()}")
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(corrector.wait)


if __name__ == "__main__":
    if "--corrector" in sys.argv:
        anyio.run(correct, sys.argv[1], sys.argv[3])
    else:
        anyio.run(main, sys.argv[1])
