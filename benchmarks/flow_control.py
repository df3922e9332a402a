"""Flow-control benchmark: what a limit adds to an ask, and the file store's shared budget.

Run: ``.venv/bin/python benchmarks/flow_control.py [--quick] [--backend=asyncio|trio]``
(the full run takes about 30 s). Prints one table per backend.

1. Uncontended limit check: a run of sequential asks to one agent, with no
   limit (the baseline, measured in the same run, interleaved), with a
   concurrency limit and with a requests-per-minute limit nobody reaches; µs
   per ask (medians) and what the limit adds (the median of its differences
   to the baseline of the same repetition). Once on a
   store without shared budgets (the runtime's own limiter) and once on the
   memory store (a ``SharedLimits`` store: budgets shared by its runtimes).
   Also the limiter alone: ``acquire`` + ``release`` in a loop.
2. The file store's budget shared by processes: one ``take_limit`` (flock,
   read, write, rename) and one slot taken and given back, µs p50 / p95.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time

import anyio
from _machine import cpu_model

from actorflow import Limit, Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.runtime import RuntimeConfig
from actorflow.runtime.flow import Limiter, SystemClock
from actorflow.storage import FileStore, MemoryStore

QUICK = "--quick" in sys.argv
ASKS = 500 if QUICK else 1000
REPS = 3 if QUICK else 15
TAKES = 300 if QUICK else 2000
LIMITER_LOOPS = 20_000 if QUICK else 200_000


class Ping(Request[int], frozen=True):
    n: int


class Free(Specialist):
    @handler
    async def ping(self, ping: Ping) -> int:
        return ping.n


class Capped(Specialist):
    limit = "cap"

    @handler
    async def ping(self, ping: Ping) -> int:
        return ping.n


class Rated(Specialist):
    limit = "rate"

    @handler
    async def ping(self, ping: Ping) -> int:
        return ping.n


AGENTS: dict[str, type[Specialist]] = {"none": Free, "max_concurrent": Capped, "per_minute": Rated}


class Sequential(Orchestrator):
    async def run(self, ctx: RunContext, kind: str) -> int:
        agent = await ctx.spawn(AGENTS[kind], name="agent")
        total = 0
        for n in range(ASKS):
            total += await ctx.ask(agent, Ping(n))
        return total


LIMITS = [Limit("cap", max_concurrent=1_000), Limit("rate", per_minute=1_000_000_000)]


async def _per_ask(shared: bool) -> dict[str, list[float]]:
    """µs per ask of each kind, one sample per repetition (kinds interleaved in each)."""
    samples: dict[str, list[float]] = {kind: [] for kind in AGENTS}
    config = RuntimeConfig(durability="phase", retention=None)  # type: ignore[arg-type]
    kinds = list(AGENTS)
    for rep in range(REPS):
        for kind in kinds[rep % 3 :] + kinds[: rep % 3]:  # each kind first in turn
            async with Runtime(store=MemoryStore(), config=config, limits=LIMITS) as runtime:
                if not shared:  # the runtime's own limiter, as on a store with no budgets (S3)
                    assert runtime._runs._run_driver is not None
                    runtime.flow.limiters.share(None)
                gc.collect()  # the garbage of the run before is not this run's cost
                start = time.perf_counter()
                await runtime.run(Sequential, kind)
                samples[kind].append((time.perf_counter() - start) / ASKS * 1e6)
    return samples


async def _limiter_alone(limit: Limit) -> float:
    limiter = Limiter(limit, SystemClock())
    start = time.perf_counter()
    for _ in range(LIMITER_LOOPS):
        (await limiter.acquire()).release()
    return (time.perf_counter() - start) / LIMITER_LOOPS * 1e6


async def _file_budget() -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as root:
        async with FileStore(root) as store:
            takes: list[float] = []
            slots: list[float] = []
            for _ in range(TAKES):
                start = time.perf_counter()
                await store.take_limit(
                    "bench", per_minute=1_000_000_000, tokens_per_minute=None, now=time.time()
                )
                takes.append((time.perf_counter() - start) * 1e6)
                start = time.perf_counter()
                slot = await store.take_limit_slot("bench", 4)
                assert slot is not None
                store.release_limit_slot(slot)
                slots.append((time.perf_counter() - start) * 1e6)
    return takes, slots


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    print(f"{cpu_model()}, Python {sys.version.split()[0]}")
    rows: list[tuple[str, str, str, str]] = []
    for shared, label in ((False, "runtime limiter"), (True, "memory store budgets")):
        per = await _per_ask(shared)
        base = statistics.median(per["none"])
        for kind in ("max_concurrent", "per_minute"):
            # paired with the baseline of the same repetition: the machine's drift cancels
            added = statistics.median(a - b for a, b in zip(per[kind], per["none"], strict=True))
            rows.append(
                (
                    f"ask with {kind} ({label})",
                    f"{statistics.median(per[kind]):.1f} µs vs {base:.1f} µs",
                    f"{(base + added) / base:.3f}x",
                    f"{added:+.2f} µs",
                )
            )
    for limit in LIMITS:
        alone = await _limiter_alone(limit)
        kind = "max_concurrent" if limit.max_concurrent else "per_minute"
        rows.append(
            (f"limiter acquire+release alone ({kind})", f"{alone:.2f} µs", "", f"{alone:+.2f} µs")
        )
    takes, slots = await _file_budget()
    rows.append(
        (
            "file store take_limit (flock+read+write)",
            f"p50 {_p(takes, 0.5):.0f} µs, p95 {_p(takes, 0.95):.0f} µs",
            "",
            "target <= 1000 µs",
        )
    )
    rows.append(
        (
            "file store slot take+release",
            f"p50 {_p(slots, 0.5):.0f} µs, p95 {_p(slots, 0.95):.0f} µs",
            "",
            "target <= 1000 µs",
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    header = ("measure", "time", "ratio", "added / target")
    widths = [max(w, len(h)) for w, h in zip(widths, header, strict=True)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    backends = ["asyncio", "trio"]
    for arg in sys.argv[1:]:
        if arg.startswith("--backend="):
            backends = [arg.split("=", 1)[1]]
    for name in backends:
        print(f"\n== {name} ==")
        anyio.run(main, backend=name)
