"""Ephemeral emits reach readers in other processes through the store's event stream.

``Actor.emit`` encodes the event and queues it for the runtime's writer
thread, which appends batches to the store's per-run stream (memory, file);
``runtime.watch(..., events=True)`` reads it from any process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.streams.text import TextReceiveStream
from structlog.testing import capture_logs

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.errors import StorageError
from actorflow.runtime import EmitRecorded, EmitsLost, EmitStreamed, Emitted, RunEnded, WatchEvent
from actorflow.storage import (
    FileStore,
    MemoryStore,
    RunStatus,
    SupportsEventStream,
    encode_event,
)
from tests.runtime.workflow.crash_parent import child_env
from tests.runtime.workflow.stream_child import Streamer, StreamGo, Token

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

    from actorflow.storage import EventStreamWriter

HALF = 50
BIG = 256 * 1024  # bytes of one large event: 40 of them pass the 4 MiB an outbox holds


class Tokens(Orchestrator):
    """Emits ``n`` tokens, a durable one in the middle."""

    async def run(self, ctx: RunContext, n: int) -> int:
        for i in range(n):
            self.emit(Token(i))
            if i == n // 2:
                await ctx.emit(Token(-1), durable=True)  # in the log, not the stream
        return n


class Odd(Orchestrator):
    """Emits something msgspec cannot encode between two tokens."""

    async def run(self, ctx: RunContext, _: None) -> int:
        self.emit(Token(0))
        self.emit(object())  # never raised into the run
        self.emit(object())
        self.emit(Token(1))
        return 1


class Large(Orchestrator):
    """Emits ``n`` events of ``BIG`` bytes each."""

    async def run(self, ctx: RunContext, n: int) -> int:
        for i in range(n):
            self.emit(bytes([i]) * BIG)
        return n


async def _watched(runtime: Runtime, run_id: str, **options: Any) -> list[WatchEvent]:
    return [e async for e in runtime.watch(run_id, events=True, poll_interval=0.01, **options)]


def _streamed(events: Sequence[WatchEvent]) -> list[tuple[int, Any]]:
    return [(e.position, e.decode()) for e in events if isinstance(e, EmitStreamed)]


async def _lines(child: anyio.abc.Process) -> AsyncIterator[dict[str, Any]]:
    """The child's JSON lines (anything else it prints, a log line, is skipped)."""
    assert child.stdout is not None
    buffered = ""
    async for chunk in TextReceiveStream(child.stdout):
        buffered += chunk
        *lines, buffered = buffered.split("\n")
        for line in lines:
            if line.startswith("{"):
                yield json.loads(line)


async def test_a_reader_in_another_process_gets_each_event_while_the_run_goes_on(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    store_dir = tmp_path / "store"
    command = [
        sys.executable,
        "-m",
        "tests.runtime.workflow.stream_child",
        str(store_dir),
        "s",
        anyio_backend_name,
    ]
    got: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with Runtime(store=FileStore(store_dir)) as runtime:
            handle = await runtime.start(Streamer, HALF, run_id="s")
            async with await anyio.open_process(command, env=child_env()) as child:
                lines = _lines(child)
                async for line in lines:
                    got.append(line)
                    if len(got) == HALF:
                        break
                # the first half crossed while the run still waits for StreamGo
                assert handle.status is RunStatus.RUNNING
                assert not handle.done
                await runtime.signal("s", StreamGo())
                assert await handle.result() == 2 * HALF
                async for line in lines:
                    got.append(line)
                assert await child.wait() == 0
    assert got[-1] == {"end": "completed"}
    streamed = got[:-1]
    assert [e["position"] for e in streamed] == list(range(2 * HALF))
    assert [e["n"] for e in streamed] == list(range(2 * HALF))
    assert {e["agent"] for e in streamed[:HALF]} == {"talker"}
    assert {e["agent"] for e in streamed[HALF:]} == {"orchestrator"}


async def test_ephemeral_emits_are_streamed_in_order_and_durable_ones_only_logged() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        await runtime.run(Tokens, 10, run_id="t")
        events = await _watched(runtime, "t")
    assert _streamed(events) == [(i, {"n": i}) for i in range(10)]
    durable = [e for e in events if isinstance(e, EmitRecorded)]
    assert [e.decode(Token) for e in durable] == [Token(-1)]
    assert isinstance(events[-1], RunEnded)  # after every streamed event
    assert not any(isinstance(e, EmitsLost) for e in events)


async def test_a_reader_resumes_from_any_position_it_saw(tmp_path: Path) -> None:
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        await runtime.run(Tokens, 10, run_id="r")
        seen = []
        async with contextlib.aclosing(runtime.watch("r", events=True)) as watch:
            async for event in watch:
                if isinstance(event, EmitStreamed):
                    seen.append(event.position)
                    if len(seen) == 4:
                        break  # the reader is dropped
        rest = await _watched(runtime, "r", position=0, event_position=seen[-1] + 1)
    assert seen == [0, 1, 2, 3]
    assert _streamed(rest) == [(i, {"n": i}) for i in range(4, 10)]


async def test_events_the_bound_removed_before_they_were_read_show_as_a_gap(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path, event_bytes=4 * BIG)
    async with Runtime(store=store) as runtime:
        await runtime.run(Tokens, 0, run_id="b")
        writer = store.open_event_stream("b")  # batches as an owner's writer thread writes them
        for i in range(30):
            noise = os.urandom(BIG)  # incompressible: it counts at its size against the bound
            event = encode_event(0.0, "orchestrator", "Noise", [i, noise])
            write = functools.partial(writer.write, [event], lost=0, end=i == 29)
            await anyio.to_thread.run_sync(write)
        events = await _watched(runtime, "b")
    lost = [e for e in events if isinstance(e, EmitsLost)]
    streamed = _streamed(events)
    assert lost == [EmitsLost(position=0, count=streamed[0][0])]
    assert 0 < lost[0].count < 30
    assert [(p, event[0]) for p, event in streamed] == [(p, p) for p in range(lost[0].count, 30)]


async def test_an_unencodable_event_is_left_out_counted_and_logged_once() -> None:
    with capture_logs() as logs:
        async with Runtime(store=MemoryStore()) as runtime:
            handle = await runtime.start(Odd, None, run_id="o")
            local = [e async for e in handle.events(lifecycle=False)]
            assert await handle.result() == 1
            events = await _watched(runtime, "o")
    assert _streamed(events) == [(0, {"n": 0}), (1, {"n": 1})]  # it takes no position
    assert len(local) == 4  # this process's readers still get it
    assert isinstance(local[1], Emitted)
    assert handle.metrics["emits_not_streamed"] == 2
    warned = [e for e in logs if e["event"] == "emit_not_streamed"]
    assert len(warned) == 1
    assert warned[0]["type"] == "object"
    assert warned[0]["log_level"] == "warning"


async def test_runs_that_stream_nothing_write_nothing(tmp_path: Path) -> None:
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        await runtime.run(Tokens, 0, run_id="quiet")
    async with Runtime(
        store=FileStore(tmp_path), config=RuntimeConfig(stream_emits=False)
    ) as runtime:
        await runtime.run(Tokens, 5, run_id="off")
        assert _streamed(await _watched(runtime, "off")) == []
    for run_id in ("quiet", "off"):
        assert not (tmp_path / "runs" / run_id / "events").exists()


# --- a writer that is slow or stuck never holds up the run -------------------------------


class _GatedWriter:
    def __init__(self, inner: EventStreamWriter, store: GatedStore) -> None:
        self._inner = inner
        self._store = store

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        self._store.entered.set()
        self._store.gate.wait(60)  # bounded: a failing test never leaves it forever
        self._inner.write(events, lost=lost, end=end)

    def close(self) -> None:
        self._inner.close()


class GatedStore(MemoryStore):
    """A memory store whose event stream writes wait until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        return _GatedWriter(super().open_event_stream(run_id), self)


async def test_a_stuck_writer_costs_the_run_only_the_events_it_could_not_hold() -> None:
    store = GatedStore()
    try:
        async with Runtime(store=store) as runtime:
            handle = await runtime.start(Large, 40, run_id="g")
            assert await handle.result() == 40  # the writer never wrote a thing meanwhile
            assert store.entered.is_set()
            assert not store.gate.is_set()
            dropped = int(handle.metrics["emits_not_streamed"])
            assert 0 < dropped < 40
            store.gate.set()
        # the runtime's exit let the writer finish: every position is accounted for
        async with Runtime(store=store) as runtime:
            events = await _watched(runtime, "g")
    finally:
        store.gate.set()
    # no room was made while the writer was stuck: the first ones were kept, the rest lost
    kept = 40 - dropped
    assert _streamed(events) == [(p, bytes([p]) * BIG) for p in range(kept)]
    assert [e for e in events if isinstance(e, EmitsLost)] == [
        EmitsLost(position=kept, count=dropped)
    ]


async def test_a_writer_stuck_for_good_holds_up_neither_the_run_nor_the_exit() -> None:
    store = GatedStore()
    try:
        with capture_logs() as logs, anyio.fail_after(30):
            async with Runtime(store=store, shutdown_timeout=0.1) as runtime:
                assert await runtime.run(Large, 3, run_id="k") == 3
        assert store.entered.is_set()
        assert any(e["event"] == "emit_writer_stuck" for e in logs)
    finally:
        store.gate.set()


class _FailingOnceWriter:
    def __init__(self, inner: EventStreamWriter, store: FailingOnceStore) -> None:
        self._inner = inner
        self._store = store

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        if events and not self._store.failed:
            self._store.failed = len(events)
            self._store.refused.set()
            raise StorageError("stream events", "the disk is full")
        self._inner.write(events, lost=lost, end=end)

    def close(self) -> None:
        self._inner.close()


class FailingOnceStore(MemoryStore):
    """A memory store whose event stream refuses its first batch of events."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0
        self.refused = threading.Event()

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        return _FailingOnceWriter(super().open_event_stream(run_id), self)


class TwoBursts(Orchestrator):
    """Emits ``n`` tokens, lets the writer take them, then ``n`` more."""

    async def run(self, ctx: RunContext, n: int) -> int:
        for i in range(n):
            self.emit(Token(i))
        await WRITTEN.wait()
        for i in range(n, 2 * n):
            self.emit(Token(i))
        return 2 * n


WRITTEN = anyio.Event()


async def test_a_failed_write_loses_its_batch_as_a_gap_and_the_stream_goes_on() -> None:
    global WRITTEN
    WRITTEN = anyio.Event()
    store = FailingOnceStore()
    with capture_logs() as logs:
        async with Runtime(store=store) as runtime:
            handle = await runtime.start(TwoBursts, 5, run_id="f")
            # the writer thread took (and failed) the first burst
            assert await anyio.to_thread.run_sync(store.refused.wait, 30)
            WRITTEN.set()
            assert await handle.result() == 10
            events = await _watched(runtime, "f")
    failed = store.failed
    assert [e for e in events if isinstance(e, EmitsLost)] == [EmitsLost(position=0, count=failed)]
    assert _streamed(events) == [(i, {"n": i}) for i in range(failed, 10)]
    assert handle.metrics["emits_not_streamed"] == failed
    assert [e["event"] for e in logs].count("emit_stream_failed") == 1


class NoStreamStore(MemoryStore):
    """A store without an event stream (as ``S3Store``)."""

    open_event_stream = None  # type: ignore[assignment]  # None: not a SupportsEventStream
    read_events = None  # type: ignore[assignment]


async def test_on_a_store_without_a_stream_emits_stay_in_process_and_watch_goes_without() -> None:
    store = NoStreamStore()
    assert not isinstance(cast("object", store), SupportsEventStream)
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Tokens, 4, run_id="n")
        local = [e async for e in handle.events(lifecycle=False)]
        events = await _watched(runtime, "n")
    assert [e.event.n for e in local] == [0, 1, 2, -1, 3]  # this process's readers got them
    assert _streamed(events) == []
    assert [e.decode(Token) for e in events if isinstance(e, EmitRecorded)] == [Token(-1)]
    assert isinstance(events[-1], RunEnded)


async def test_positions_go_on_across_a_recovery(tmp_path: Path) -> None:
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        await runtime.start(Streamer, 3, run_id="rec")
        seen = 0
        async with contextlib.aclosing(runtime.watch("rec", events=True)) as watch:
            async for event in watch:
                seen += isinstance(event, EmitStreamed)
                if seen == 3:  # the first attempt streamed its half and waits for StreamGo
                    break
    # the runtime stopped: the run is interrupted; the next attempt goes on from the log
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        await runtime.signal("rec", StreamGo())
        assert await runtime.recover("rec") == {"rec": 6}
        events = await _watched(runtime, "rec", until="finished")
    # the agent's step was replayed, not run again: it streamed nothing twice
    assert _streamed(events) == [(i, {"n": i}) for i in range(6)]
    assert not any(isinstance(e, EmitsLost) for e in events)
