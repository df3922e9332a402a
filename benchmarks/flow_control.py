"""Flow-control benchmark: what a limit adds to an ask, and the file store's shared budget.

Run: ``.venv/bin/python benchmarks/flow_control.py [--quick] [--only=ask,alone,file]
[--backend=asyncio|trio]`` (the full run takes about a minute). Prints one
table per backend.

1. Uncontended limit check, added to an ask. One run spawns an agent with no
   limit and one with the limit; it asks them in blocks of ``BLOCK_ASKS``
   sequential asks, the two blocks of a pair back to back, in turns (which
   goes first alternates), for ``BLOCKS`` pairs. The machine's drift (noise of
   tens of µs per ask here) moves both blocks of a pair alike, so the
   per-pair difference (µs per ask) isolates the limit: reported as its
   median with a 95 % distribution-free confidence interval (order
   statistics of the sign test), and as a ratio to the unlimited ask. Once
   with the runtime's own limiter (a store without shared budgets) and once
   on the memory store (a ``SharedLimits`` store: budgets shared by its runtimes).
   An A/A control row pairs two unlimited agents the same way: what the
   method reports when nothing differs.
2. The limiter alone, in a loop: ``try_take`` + ``give_back`` (what an
   uncontended ask does) and ``acquire`` + ``release`` (what an ask that may wait does).
3. The file store's budget shared by processes: one ``take_limit``, and one
   slot taken and given back, µs p50 / p95 / p99 in one process; then
   ``take_limit`` from three processes at once on one key (each acquisition
   timed in its process).
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
import sniffio
from _machine import cpu_model

from actorflow import Limit, Orchestrator, Request, RunContext, Runtime, Specialist, handler
from actorflow.runtime import RuntimeConfig
from actorflow.runtime.flow import Limiter, SystemClock
from actorflow.storage import FileStore, MemoryStore

QUICK = "--quick" in sys.argv
BLOCKS = 60 if QUICK else 400
BLOCK_ASKS = 50
TAKES = 300 if QUICK else 3000
CHILD_TAKES = 300 if QUICK else 1000
CHILDREN = 3
CHILD_TIMEOUT = 120.0
LIMITER_LOOPS = 20_000 if QUICK else 200_000
ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), None)


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


class Free2(Free):
    """A second unlimited agent class: the A/A control (what the method reads as noise)."""


AGENTS: dict[str, type[Specialist]] = {
    "no limit (A/A control)": Free2,
    "max_concurrent": Capped,
    "per_minute": Rated,
}
PAIRS: list[tuple[float, float]] = []  # (free, limited) µs per ask, one pair per block


class Blocks(Orchestrator):
    """Asks an unlimited and a limited agent in interleaved blocks, timing each block."""

    async def run(self, ctx: RunContext, kind: str) -> int:
        free = await ctx.spawn(Free, name="free")
        limited = await ctx.spawn(AGENTS[kind], name="limited")
        total = 0
        for block in range(BLOCKS):
            times = {}
            order = (free, limited) if block % 2 == 0 else (limited, free)
            for agent in order:
                start = time.perf_counter()
                for n in range(BLOCK_ASKS):
                    total += await ctx.ask(agent, Ping(n))
                times[agent is limited] = (time.perf_counter() - start) / BLOCK_ASKS * 1e6
            PAIRS.append((times[False], times[True]))
        return total


LIMITS = [Limit("cap", max_concurrent=1_000), Limit("rate", per_minute=1_000_000_000)]


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """The median of ``values`` and its 95 % confidence interval (sign test order statistics)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half))
    high = min(n - 1, math.ceil(n / 2 + half))
    return statistics.median(ordered), ordered[low], ordered[high]


async def _added(kind: str, shared: bool) -> tuple[float, float, float, float]:
    """(free µs per ask, median added µs, its CI low, high) for one limit kind."""
    config = RuntimeConfig(durability="phase", retention=None, determinism="off")  # type: ignore[arg-type]
    async with Runtime(store=MemoryStore(), config=config, limits=LIMITS) as runtime:
        if not shared:  # the runtime's own limiter, as on a store with no budgets (S3)
            assert runtime._runs._run_driver is not None
            runtime.flow.limiters.share(None)
        PAIRS.clear()
        gc.collect()
        await runtime.run(Blocks, kind)
    diffs = [limited - free for free, limited in PAIRS]
    median, low, high = median_interval(diffs)
    return statistics.median(f for f, _ in PAIRS), median, low, high


async def _limiter_alone(limit: Limit) -> tuple[float, float]:
    """µs per ``try_take`` + ``give_back`` (an uncontended ask's), and per ``acquire`` + release."""
    limiter = Limiter(limit, SystemClock())
    start = time.perf_counter()
    for _ in range(LIMITER_LOOPS):
        assert limiter.try_take()
        limiter.give_back()
    taken = (time.perf_counter() - start) / LIMITER_LOOPS * 1e6
    start = time.perf_counter()
    for _ in range(LIMITER_LOOPS):
        (await limiter.acquire()).release()
    return taken, (time.perf_counter() - start) / LIMITER_LOOPS * 1e6


async def _takes(root: str, count: int) -> list[float]:
    """µs per ``take_limit`` on the store at ``root``, ``count`` times."""
    async with FileStore(root) as store:
        takes: list[float] = []
        for _ in range(count):
            start = time.perf_counter()
            await store.take_limit(
                "bench", per_minute=1_000_000_000, tokens_per_minute=None, now=time.time()
            )
            takes.append((time.perf_counter() - start) * 1e6)
    return takes


async def _file_budget(root: str) -> tuple[list[float], list[float]]:
    takes = await _takes(root, TAKES)
    slots: list[float] = []
    async with FileStore(root) as store:
        for _ in range(TAKES):
            start = time.perf_counter()
            slot = await store.take_limit_slot("bench", 4)
            assert slot is not None
            store.release_limit_slot(slot)
            slots.append((time.perf_counter() - start) * 1e6)
    return takes, slots


def _contended(root: str, backend: str) -> list[float]:
    """Each acquisition's µs, from ``CHILDREN`` processes taking from one budget at once."""
    start_at = time.time() + 1.0  # the children start together
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", root, backend, repr(start_at)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(CHILDREN)
    ]
    out: list[float] = []
    for child in children:
        text, _ = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == 0
        out += [float(v) for v in text.split()]
    return out


async def _child(root: str, start_at: float) -> None:
    async with FileStore(root) as store:  # opened (and its budget file) before the start
        await store.take_limit("warm", per_minute=1, tokens_per_minute=None, now=time.time())
    await anyio.sleep(max(start_at - time.time(), 0.0))
    print(" ".join(f"{v:.1f}" for v in await _takes(root, CHILD_TAKES)))


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _percentiles(values: list[float]) -> str:
    return f"p50 {_p(values, 0.5):.0f} / p95 {_p(values, 0.95):.0f} / p99 {_p(values, 0.99):.0f} µs"


async def main() -> None:
    backend = sniffio.current_async_library()
    print(f"{cpu_model()}, Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}")
    rows: list[tuple[str, str, str, str]] = []
    if ONLY is None or "ask" in ONLY:
        for shared, label in ((False, "runtime limiter"), (True, "memory store budgets")):
            for kind in AGENTS if not shared else list(AGENTS)[1:]:
                free, added, low, high = await _added(kind, shared)
                rows.append(
                    (
                        f"ask with {kind} ({label}), {BLOCKS} block pairs",
                        f"{free:.1f} µs unlimited",
                        f"{(free + added) / free:.3f}x",
                        f"{added:+.2f} µs (95% CI {low:+.2f} to {high:+.2f})",
                    )
                )
    if ONLY is None or "alone" in ONLY:
        for limit in LIMITS:
            taken, acquired = await _limiter_alone(limit)
            kind = "max_concurrent" if limit.max_concurrent else "per_minute"
            rows.append((f"limiter try_take+give_back ({kind})", f"{taken:.2f} µs", "", ""))
            rows.append((f"limiter acquire+release ({kind})", f"{acquired:.2f} µs", "", ""))
    if ONLY is None or "file" in ONLY:
        with tempfile.TemporaryDirectory() as root:
            takes, slots = await _file_budget(root)
        rows.append(("file store take_limit, one process", _percentiles(takes), "", "<= 1000 µs"))
        rows.append(("file store slot take+release", _percentiles(slots), "", "<= 1000 µs"))
        with tempfile.TemporaryDirectory() as root:
            contended = await anyio.to_thread.run_sync(_contended, root, backend)
        rows.append(
            (
                f"file store take_limit, {CHILDREN} processes at once",
                _percentiles(contended),
                "",
                "<= 1000 µs",
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
    if sys.argv[1:2] == ["--child"]:
        _, _, child_root, child_backend, child_start = sys.argv
        anyio.run(_child, child_root, float(child_start), backend=child_backend)
        sys.exit(0)
    backends = ["asyncio", "trio"]
    for arg in sys.argv[1:]:
        if arg.startswith("--backend="):
            backends = [arg.split("=", 1)[1]]
    for name in backends:
        print(f"\n== {name} ==")
        anyio.run(main, backend=name)
