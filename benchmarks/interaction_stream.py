"""The cross-process event stream: what a streamed ``emit`` costs a run, reader or not.

A run's orchestrator (a ``Runtime`` on a ``FileStore`` in a temp folder)
does N steps of token work: it builds a small ``Token`` and yields to the
loop every 256 tokens, as an agent streaming a model's output does. The
same run is timed, from the moment it is let go to ``handle.result()``,
in the same sitting, one variant after another per round:

- no emit: the loop alone (the baseline every ratio divides by);
- emit, stream off: ``self.emit(token)`` with ``RuntimeConfig(stream_emits=False)``
  (in-process readers only; none reads);
- emit, streamed: the same emits also go to the store's event stream
  (encoded on the loop, written by the runtime's writer thread, no fsync);
- emit, streamed + reader: the same while another process follows the run
  with ``runtime.watch(run_id, events=True)`` (polling every 50 ms), and must
  receive every event.

Per event = (the variant's time - the baseline's) / N, in µs; "not streamed"
counts, over all rounds, the events the run dropped from its stream (a
reader's ``EmitsLost``, with one). Floors in the
same sitting: ``encode_event`` alone (the MessagePack encoding a streamed emit
pays on the loop) and ``emit`` of a run with nothing to stream to.

Run: ``python benchmarks/interaction_stream.py [--quick]``. The reader
process is this file with ``read`` (see ``_read``).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec
from _machine import cpu_model
from anyio.lowlevel import checkpoint
from anyio.streams.text import TextReceiveStream

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.runtime import EmitsLost, EmitStreamed
from actorflow.storage import FileStore, encode_event

QUICK = "--quick" in sys.argv
N = 20_000 if QUICK else 200_000
REPEATS = 3 if QUICK else 5
BATCH = 256
_HERE = str(Path(__file__).resolve())


class Token(msgspec.Struct, frozen=True):
    n: int
    text: str


class Tokens(Orchestrator):
    """``n`` tokens of work, each emitted when ``emit`` is set, after ``Go`` is given."""

    __actorflow_name__ = "bench.stream.Tokens"

    async def run(self, ctx: RunContext, job: tuple[int, bool]) -> int:
        n, emit = job
        await GO.wait()
        if emit:
            for i in range(n):
                self.emit(Token(i, "tok"))
                if i % BATCH == BATCH - 1:
                    await checkpoint()
        else:
            for i in range(n):
                Token(i, "tok")
                if i % BATCH == BATCH - 1:
                    await checkpoint()
        return n


GO = anyio.Event()


async def _time_run(
    store_dir: str, run_id: str, *, emit: bool, stream: bool, reader: bool
) -> tuple[float, int]:
    """Seconds from letting the run go to its result (a reader process first, if asked).

    And how many events were not streamed (the run's count; the reader's, with one).
    """
    global GO
    GO = anyio.Event()
    config = RuntimeConfig(stream_emits=stream, retention=None)
    async with Runtime(store=FileStore(store_dir), config=config) as runtime:
        handle = await runtime.start(Tokens, (N, emit), run_id=run_id)
        if not reader:
            start = time.perf_counter()
            GO.set()
            await handle.result()
            elapsed = time.perf_counter() - start
            return elapsed, int(handle.metrics.get("emits_not_streamed", 0))
        command = [sys.executable, _HERE, "read", store_dir, run_id]
        async with await anyio.open_process(command) as child:
            assert child.stdout is not None
            lines = TextReceiveStream(child.stdout)
            buffered = ""
            async for chunk in lines:  # until the reader follows the run
                buffered += chunk
                if "ready" in buffered:
                    break
            start = time.perf_counter()
            GO.set()
            await handle.result()
            elapsed = time.perf_counter() - start
            async for chunk in lines:
                buffered += chunk
            await child.wait()
        got, lost = map(int, buffered.split()[-2:])
        assert got + lost == N, (got, lost)  # every position reached the other process
        return elapsed, lost


async def _read(store_dir: str, run_id: str) -> None:
    """The reader process: follow the run's events, then print how many came and were lost."""
    got = lost = 0
    async with Runtime(store=FileStore(store_dir)) as runtime:
        print("ready", flush=True)
        async for event in runtime.watch(run_id, events=True, poll_interval=0.05):
            if isinstance(event, EmitStreamed):
                got += 1
            elif isinstance(event, EmitsLost):
                lost += event.count
    print(got, lost, flush=True)


def _floor_encode() -> float:
    """ns per ``encode_event`` of one token (what a streamed emit pays on the loop)."""
    token = Token(0, "tok")
    now = time.time()
    start = time.perf_counter()
    for _ in range(N):
        encode_event(now, "orchestrator", "Token", token)
    return (time.perf_counter() - start) / N * 1e9


VARIANTS = {
    "no emit (baseline)": {"emit": False, "stream": True, "reader": False},
    "emit, stream off": {"emit": True, "stream": False, "reader": False},
    "emit, streamed": {"emit": True, "stream": True, "reader": False},
    "emit, streamed + reader": {"emit": True, "stream": True, "reader": True},
}


async def measure() -> dict[str, tuple[float, int]]:
    """Each variant's median time, and the events it did not stream over all rounds."""
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    lost = dict.fromkeys(VARIANTS, 0)
    with tempfile.TemporaryDirectory() as folder:
        for r in range(REPEATS):
            for i, (name, options) in enumerate(VARIANTS.items()):
                seconds, missing = await _time_run(folder, f"r{r}-{i}", **options)
                times[name].append(seconds)
                lost[name] += missing
    return {name: (statistics.median(times[name]), lost[name]) for name in VARIANTS}


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main() -> None:
    print(f"python {sys.version.split()[0]}, anyio {_version('anyio')}, trio {_version('trio')}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; N={N:,} events, median of {REPEATS}")
    print(f"floor: encode_event of one token {_floor_encode():,.0f} ns")
    for backend in ("asyncio", "trio"):
        m = anyio.run(measure, backend=backend)
        base = m["no emit (baseline)"][0]
        print(f"\n{backend}")
        print(
            f"{'variant':26} {'run (ms)':>10} {'per event (µs)':>15} {'vs baseline':>12}"
            f" {'not streamed':>13}"
        )
        for name, (seconds, lost) in m.items():
            per = (seconds - base) / N * 1e6
            cell = "" if seconds is base else f"{per:15.2f}"
            print(f"{name:26} {seconds * 1000:10.1f} {cell:>15} {seconds / base:11.2f}x {lost:13,}")


def _run(args: list[str]) -> None:
    if args and args[0] == "read":
        anyio.run(_read, args[1], args[2])
    else:
        main()


if __name__ == "__main__":
    _run(sys.argv[1:])
