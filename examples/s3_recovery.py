"""An S3-backed run, crashed in one process and recovered by a second one.

    python examples/s3_recovery.py start s3://BUCKET/PREFIX     # dies (os._exit) mid-run
    python examples/s3_recovery.py recover s3://BUCKET/PREFIX   # another process finishes it

The endpoint comes from ``AWS_ENDPOINT_URL`` (a local S3-compatible server such
as SeaweedFS or MinIO), credentials from the usual AWS variables. The first
process holds the run through a lease with a heartbeat; when it dies the lease
stops being renewed, and once it expires the second process takes the run,
replays what the first one logged and runs the rest. Needs ``actorflow[s3]``.
"""

from __future__ import annotations

import os
import sys

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.storage import S3Store

RUN_ID = "thumbnails"
LEASE_TTL = 2.0  # seconds; short so the example recovers quickly
CRASH_AFTER = int(os.environ.get("CRASH_AFTER", "0"))  # images; 0: never


class Image(Request["Thumbnail"], frozen=True):
    name: str
    width: int


class Thumbnail(msgspec.Struct, frozen=True):
    name: str
    width: int


class ResizerState(msgspec.Struct):
    done: int = 0


class Resizer(Specialist):
    state: ResizerState

    @handler
    async def resize(self, image: Image) -> Thumbnail:
        if CRASH_AFTER and self.state.done >= CRASH_AFTER:
            print(f"crashing after {self.state.done} images", flush=True)
            os._exit(9)  # no cleanup at all, like SIGKILL or a lost machine
        self.state.done += 1
        return Thumbnail(image.name, max(1, image.width // 8))


class Gallery(Orchestrator):
    @phase
    async def resize(self, ctx: RunContext, images: list[Image]) -> list[Thumbnail]:
        resizer = await ctx.spawn(Resizer, name="resizer")
        thumbs: list[Thumbnail] = []
        for image in images:  # one at a time: each result reaches the log before the next
            thumbs.append(await ctx.ask(resizer, image))
        return thumbs

    async def run(self, ctx: RunContext, count: int) -> list[Thumbnail]:
        return await self.resize(ctx, [Image(f"img-{i}.png", 800 + i) for i in range(count)])


def open_store(url: str) -> S3Store:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return S3Store(
        bucket, prefix, endpoint_url=os.environ.get("AWS_ENDPOINT_URL"), lease_ttl=LEASE_TTL
    )


async def start(url: str) -> list[Thumbnail]:
    async with Runtime(store=open_store(url)) as runtime:
        thumbs: list[Thumbnail] = await runtime.run(Gallery, 6, run_id=RUN_ID)
    return thumbs


async def recover(url: str) -> tuple[list[Thumbnail], int]:
    store = open_store(url)
    try:
        # The dead owner's lease runs out LEASE_TTL seconds after its last heartbeat.
        # No event crosses processes, so look a bounded number of times.
        for _ in range(40):
            if not await store.is_owned(RUN_ID):
                break
            await anyio.sleep(LEASE_TTL / 4)
        async with Runtime(store=store) as runtime:
            results = await runtime.recover(RUN_ID)
            replayed = runtime.handle(RUN_ID).replayed_steps
    finally:
        await store.aclose()
    thumbs: list[Thumbnail] = results[RUN_ID]
    return thumbs, replayed


if __name__ == "__main__":
    command, location = sys.argv[1], sys.argv[2]
    if command == "start":
        print(f"finished without a crash: {len(anyio.run(start, location))} thumbnails")
    else:
        thumbnails, replayed_steps = anyio.run(recover, location)
        print(f"recovered: {len(thumbnails)} thumbnails, {replayed_steps} step(s) replayed")
