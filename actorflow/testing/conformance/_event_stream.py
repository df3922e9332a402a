"""Conformance: a run's event stream (``SupportsEventStream``), where offered.

Positions go on across writers (attempts) and count what an owner dropped;
a reader resumes from any position, in slices of ``limit``; ``ended`` says
whether the last writer ended its stream; the stream is bounded (the oldest
batches go, the newest stay); unknown runs read empty, bad ids are refused.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

import anyio.to_thread
import pytest

from actorflow.errors import InvalidRunIdError
from actorflow.storage import Store, SupportsEventStream, encode_event
from actorflow.testing.conformance._samples import manifest

if TYPE_CHECKING:
    from actorflow.storage import EventStreamWriter

__all__ = ["EventStreamTests"]

_BIG = 64 * 1024
"""Bytes of one large event: the bound test writes past the store's bound with them."""


def _streaming(store: Store) -> SupportsEventStream:
    if not isinstance(store, SupportsEventStream):
        pytest.skip("the store keeps no event stream (SupportsEventStream, an optional capability)")
    return cast("SupportsEventStream", store)


def _events(*values: object) -> list[bytes]:
    return [encode_event(1.5, "agent", "Tok", v) for v in values]


async def _write(
    writer: EventStreamWriter, values: list[object], *, lost: int = 0, end: bool = False
) -> None:
    # as the runtime does: from a thread, never on the event loop
    await anyio.to_thread.run_sync(lambda: writer.write(_events(*values), lost=lost, end=end))


class EventStreamTests:
    """What a store with an event stream promises: positions, resumption, a bound."""

    async def test_positions_go_on_across_writers_and_a_reader_resumes_anywhere(
        self, store: Store
    ) -> None:
        streams = _streaming(store)
        await store.create_run(manifest())
        empty = await streams.read_events("run-1")
        assert (empty.events, empty.next, empty.ended) == ([], 0, True)
        first = streams.open_event_stream("run-1")
        await _write(first, ["a", "b"])
        await _write(first, ["c"])
        got = await streams.read_events("run-1")
        assert [(e.position, e.decode()) for e in got.events] == [(0, "a"), (1, "b"), (2, "c")]
        assert (got.next, got.ended) == (3, False)
        assert (got.events[0].agent, got.events[0].type) == ("agent", "Tok")
        await _write(first, [], end=True)
        await anyio.to_thread.run_sync(first.close)
        assert (await streams.read_events("run-1", 3)).ended

        second = streams.open_event_stream("run-1")  # the next attempt goes on after
        await _write(second, ["d", "e"], lost=2)  # two dropped by its owner: a gap
        got = await streams.read_events("run-1", 2)
        assert [(e.position, e.decode()) for e in got.events] == [(2, "c"), (5, "d"), (6, "e")]
        assert (got.next, got.ended) == (7, False)
        sliced = await streams.read_events("run-1", 1, limit=2)
        assert [e.position for e in sliced.events] == [1, 2]
        assert sliced.next == 3
        rest = await streams.read_events("run-1", sliced.next, limit=2)
        assert [e.position for e in rest.events] == [5, 6]
        assert (await streams.read_events("run-1", 7)).events == []
        await _write(second, [], lost=1, end=True)  # dropped at the very end: next says so
        last = await streams.read_events("run-1", 7)
        assert (last.events, last.next, last.ended) == ([], 8, True)
        await anyio.to_thread.run_sync(second.close)

    async def test_the_stream_is_bounded_and_keeps_the_newest(self, store: Store) -> None:
        streams = _streaming(store)
        await store.create_run(manifest())
        writer = streams.open_event_stream("run-1")
        blob = os.urandom(_BIG)  # incompressible
        batches = 0
        while True:  # until the oldest event is gone (a store's bound is a few MiB)
            await _write(writer, [blob, blob])
            batches += 1
            got = await streams.read_events("run-1", 0, limit=1)
            if got.events[0].position > 0:
                break
            assert batches < 2000, "the stream kept 250 MiB: it is not bounded"
        await _write(writer, ["newest"], end=True)
        await anyio.to_thread.run_sync(writer.close)
        oldest = got.events[0].position
        every = []
        position = 0
        while True:
            got = await streams.read_events("run-1", position, limit=16)
            every += got.events
            if not got.events:
                break
            position = got.next
        assert every[0].position == oldest
        assert [e.position for e in every] == list(range(oldest, 2 * batches + 1))
        assert every[-1].decode() == "newest"

    async def test_unknown_runs_read_empty_and_bad_ids_are_refused(self, store: Store) -> None:
        streams = _streaming(store)
        got = await streams.read_events("ghost", 4)
        assert (got.events, got.next, got.ended) == ([], 4, True)
        with pytest.raises(InvalidRunIdError):
            await streams.read_events("../etc")
        with pytest.raises(InvalidRunIdError):
            streams.open_event_stream("../etc")
