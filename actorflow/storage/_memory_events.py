"""A memory store's event streams: each run's newest batches, within a bound of bytes.

Batches are sealed like everything the memory store keeps, written from the
runtime's background thread and read on the event loop, so a lock guards
each run's ring (held for a list operation, never while sealing or opening).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from actorflow.storage._event_stream import (
    EventSlice,
    EventStreamWriter,
    StreamedEvent,
    open_batch,
    seal_batch,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage._sealing import Codec

__all__ = ["EventRings"]


class _Ring:
    """One run's batches: ``(first, count, end, sealed)``, oldest first."""

    def __init__(self) -> None:
        self.batches: deque[tuple[int, int, bool, bytes]] = deque()
        self.size = 0
        self.end = 0  # the position after the last event written


class _RingWriter:
    def __init__(self, rings: EventRings, run_id: str) -> None:
        self._rings = rings
        self._run_id = run_id

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        """See :meth:`EventStreamWriter.write`."""
        self._rings.write(self._run_id, events, lost, end)

    def close(self) -> None:
        """See :meth:`EventStreamWriter.close`: nothing to release."""


class EventRings:
    """The event streams of a memory store's runs.

    Args:
        codec: seals and opens batches.
        keep_bytes: sealed bytes of a run's stream kept at most (the oldest
            batches go; the newest is kept whatever its size).
    """

    def __init__(self, codec: Codec, keep_bytes: int) -> None:
        self._codec = codec
        self.keep_bytes = keep_bytes
        self._rings: dict[str, _Ring] = {}
        self._lock = threading.Lock()

    def writer(self, run_id: str) -> EventStreamWriter:
        """A writer for one attempt of the run."""
        return _RingWriter(self, run_id)

    def forget(self, run_id: str) -> None:
        """Drop the run's stream (the run is being deleted)."""
        with self._lock:
            self._rings.pop(run_id, None)

    def write(self, run_id: str, events: Sequence[bytes], lost: int, end: bool) -> None:
        """Append one batch to the run's ring (from one writer thread at a time)."""
        with self._lock:
            ring = self._rings.setdefault(run_id, _Ring())
            first = ring.end + lost
        sealed = seal_batch(self._codec, events, run_id=run_id, first=first, end=end)
        with self._lock:
            ring.batches.append((first, len(events), end, sealed))
            ring.end = first + len(events)
            ring.size += len(sealed)
            while len(ring.batches) > 1 and ring.size > self.keep_bytes:
                ring.size -= len(ring.batches.popleft()[3])

    def read(self, run_id: str, start: int, limit: int) -> EventSlice:
        """See :meth:`SupportsEventStream.read_events`."""
        with self._lock:
            ring = self._rings.get(run_id)
            if ring is None:
                return EventSlice(events=[], next=start, ended=True)
            batches = [b for b in ring.batches if b[0] + b[1] > start or b[0] >= start]
            last_end = ring.batches[-1][2] if ring.batches else True
        events: list[StreamedEvent] = []
        position = start
        for first, count, _, sealed in batches:
            if count:
                batch = open_batch(
                    self._codec, sealed, run_id=run_id, location=f"memory:{run_id}/events"
                )
                fresh = [e for e in batch.events if e.position >= position]
                room = limit - len(events)
                if len(fresh) > room:
                    events.extend(fresh[:room])
                    if room:
                        position = fresh[room - 1].position + 1
                    return EventSlice(events=events, next=position)
                events.extend(fresh)
            position = max(position, first + count)
        return EventSlice(events=events, next=position, ended=last_end)
