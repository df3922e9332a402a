"""The child program of the cross-process limit test.

Run as ``python -m tests.runtime.flow.limit_child <store_dir> <backend> <t0> <count>``:
takes ``count`` requests from the store's ``shared`` budget (60 a minute) on a
clock that runs sixty times faster than the wall from ``t0`` (the same for every
child), and prints the clock time of each request it was given, one per line.
"""

from __future__ import annotations

import sys
import time

import anyio

from actorflow.storage import FileStore

SPEED = 60.0
PER_MINUTE = 60
CHILD_TIMEOUT = 60.0


class FastClock:
    """A minute a second, the same in every process started with the same ``t0``."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0

    def now(self) -> float:
        return (time.time() - self.t0) * SPEED

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(seconds, 0.0) / SPEED)


async def main(store_dir: str, t0: float, count: int) -> None:
    clock = FastClock(t0)
    taken: list[float] = []
    with anyio.fail_after(CHILD_TIMEOUT):
        async with FileStore(store_dir) as store:
            while len(taken) < count:
                now = clock.now()
                wait = await store.take_limit(
                    "shared", per_minute=PER_MINUTE, tokens_per_minute=None, now=now
                )
                if wait <= 0:
                    taken.append(now)
                else:
                    await clock.sleep(wait)
    sys.stdout.write("".join(f"{t!r}\n" for t in taken))


if __name__ == "__main__":
    _, folder, backend, start, n = sys.argv
    anyio.run(main, folder, float(start), int(n), backend=backend)
