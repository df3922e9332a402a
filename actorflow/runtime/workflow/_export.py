"""A run's ephemeral emits, sent to its store's event stream for readers in other processes.

``emit`` must stay cheap and must never wait, nor raise into an agent. So on
the event loop an emit only encodes the event (MessagePack) and appends the
bytes to its run's :class:`Outbox`; the first emit after the outbox was
emptied hands it to the runtime's writer thread (:class:`EmitExporter`). The
thread waits ``linger`` seconds, so what follows joins the batch, then takes
all the outbox holds and writes it with one call to the store's writer
(:class:`~actorflow.storage.EventStreamWriter`: for the file store, one
``write`` without fsync). Sealing (checksum, compression, encryption) and
the write happen in that thread.

Nothing on the loop waits for the thread. An outbox holds at most
``max_pending`` bytes of encoded events; an emit that would pass it is
dropped from the stream and counted. A run of drops goes into the queue as
one count, where the drops were, before the next event queued (or the
stream's end): the writer ends its batch there and starts the next one
that many positions on, so readers see the gap exactly where the events
were lost. So a slow or
stuck store costs the run nothing but those events. An event that cannot be
encoded is left out of the stream (this process's ``handle.events()``
readers still get it), counted, and logged once per type.

The deque and the counters need no lock: the loop thread only appends (an
item is never changed once queued) and counts what it added, the writer
thread only takes and counts what it took (each counter has one writer),
and the "scheduled" flag is cleared by the writer *before* it drains, so an
emit that finds it set was appended before the drain and is in it.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Final, cast

import anyio
import anyio.to_thread

from actorflow._log import get_logger
from actorflow._text import error_message
from actorflow.runtime.actors import class_name
from actorflow.storage import encode_event

if TYPE_CHECKING:
    from actorflow.storage import EventStreamWriter

__all__ = ["LINGER", "MAX_PENDING_BYTES", "EmitExporter", "Outbox"]

_log = get_logger("actorflow.run")

LINGER: Final = 0.005
"""Seconds the writer thread waits after a wake-up, so that one batch carries many emits."""

MAX_PENDING_BYTES: Final = 4 * 1024 * 1024
"""Encoded emits a run's outbox holds at most while its writer is behind."""

_NUDGE_SLEEP = 0.0001
"""Seconds a loop far ahead of its writer thread lets it have the GIL (see ``Outbox.put``)."""

_now = time.time


class Outbox:
    """One run attempt's emits on their way to the store's event stream.

    The loop thread calls :meth:`put` and :meth:`close`; the writer thread :meth:`flush`.
    """

    __slots__ = (
        "_added",
        "_closed",
        "_drops",
        "_exporter",
        "_failed",
        "_failures",
        "_finished",
        "_marks",
        "_marks_taken",
        "_max",
        "_names",
        "_nudge",
        "_nudged",
        "_pending",
        "_signal",
        "_taken",
        "_warned",
        "_writer",
        "dropped",
        "failed",
        "run_id",
        "scheduled",
        "unencodable",
    )

    def __init__(
        self, exporter: EmitExporter, writer: EventStreamWriter, run_id: str, max_pending: int
    ) -> None:
        self.run_id = run_id
        self._exporter = exporter
        self._writer = writer
        self._max = max_pending
        self._pending: deque[bytes | int] = deque()  # events, and counts of drops between them
        self._names: dict[type, str] = {}
        self._added = 0  # bytes appended (the loop thread's)
        self._nudge = max(max_pending // 16, 1)
        self._nudged = 0  # ``_added`` when the loop last let the writer have the GIL
        self._taken = 0  # bytes written or given up (the writer thread's)
        self.dropped = 0
        """Emits left out because the writer was behind (the loop thread's)."""
        self.unencodable = 0
        """Emits left out because they cannot be encoded (the loop thread's)."""
        self.failed = 0
        """Emits lost to failed writes (the writer thread's)."""
        self._failed = 0  # of those, not yet told to the store as lost
        self._failures = 0  # writes that failed (the writer thread's)
        self._drops = 0  # drops since the last event queued, not queued yet (the loop thread's)
        self._marks = 0  # counts of drops queued (the loop thread's)
        self._marks_taken = 0  # of those, taken by the writer (the writer thread's)
        self._warned: set[str] = set()
        self.scheduled = False
        self._closed = False
        self._finished = False
        self._signal: socket.socket | None = None  # written to once the stream is ended

    @property
    def closing(self) -> bool:
        """Whether the attempt ended (the next flush ends the stream)."""
        return self._closed

    def put(self, agent: str, event: object) -> None:
        """Encode ``event`` and queue it for the writer. Never raises.

        Never waits for the writer either; while it is far behind a busy
        loop, this lets it have the GIL for a moment (see below).
        """
        if self._closed:
            return
        cls = type(event)
        name = self._names.get(cls)
        if name is None:
            name = self._names[cls] = class_name(cls)
        try:
            data = encode_event(_now(), agent, name, event)
        except Exception as exc:  # whatever encoding raises, it never reaches the agent
            self._not_encodable(agent, name, exc)
            return
        if len(data) > self._max - (self._added - self._taken):
            self._behind()
            return
        if self._drops:
            self._mark_drops()
        self._pending.append(data)
        added = self._added = self._added + len(data)
        if not self.scheduled:
            self.scheduled = True
            self._exporter.schedule(self)
        elif added - self._nudged >= self._nudge and added - self._taken >= self._nudge:
            # A loop that never waits for long starves the writer thread of the GIL:
            # it gives the GIL up in every poll of the event loop and takes it back
            # before a waiting thread wakes, so CPython never forces a switch. Let
            # it go once per sixteenth of the bound the writer is behind; past half
            # the bound, for a moment (a thread stuck in a store call costs the run
            # at most eight of those, then events are dropped).
            self._nudged = added
            time.sleep(0 if added - self._taken < self._max // 2 else _NUDGE_SLEEP)

    def _not_encodable(self, agent: str, name: str, exc: Exception) -> None:
        self.unencodable += 1
        if name not in self._warned:  # once per type: an agent may emit it per token
            self._warned.add(name)
            _log.warning(
                "emit_not_streamed",
                run_id=self.run_id,
                agent=agent,
                type=name,
                error=error_message(exc),
            )

    def _mark_drops(self) -> None:
        # counted before it is queued: a writer that finds it among what it took
        # has seen the count move, and looks for it (else it takes all as events)
        self._marks += 1
        self._pending.append(self._drops)  # the gap goes where the events were lost
        self._drops = 0

    def _behind(self) -> None:
        self.dropped += 1
        self._drops += 1
        if self.dropped == 1:
            _log.warning("emit_stream_behind", run_id=self.run_id, pending_bytes=self._max)

    def _write(self, events: list[bytes], lost: int, end: bool) -> None:
        try:
            self._writer.write(events, lost=lost + self._failed, end=end)
        except Exception as exc:  # the thread serves every run: it never dies of one
            self.failed += len(events)
            self._failed += lost + len(events)  # the next batch says they were lost
            self._failures += 1
            if self._failures == 1:
                _log.warning("emit_stream_failed", run_id=self.run_id, error=error_message(exc))
        else:
            self._failed = 0

    def close(self) -> None:
        """The attempt ended: the writer ends the stream after what is queued. Never blocks.

        An outbox that was never given an event writes nothing at all.
        """
        if self._closed:
            return
        self._closed = True
        if self.dropped or self.unencodable:
            _log.warning(
                "emits_not_streamed",
                run_id=self.run_id,
                dropped=self.dropped,
                unencodable=self.unencodable,
            )
        if not (self._added or self.dropped):
            self._finished = True  # nothing streamed: no end to write, nothing opened
            return
        if self._drops:
            self._mark_drops()
        if not self.scheduled:
            self.scheduled = True
            self._exporter.schedule(self)

    async def end(self, grace: float) -> bool:
        """Close, and wait until the writer has ended the stream, at most ``grace`` seconds.

        Returns whether it did. The run calls this before it stores how its
        attempt ended, so a reader that sees the run stopped finds every
        event it streamed; a writer stuck in the store costs it ``grace``.
        Cancellable.
        """
        if self._closed or not (self._added or self.dropped):
            self.close()
            return self._finished
        wait_on, self._signal = socket.socketpair()
        wait_on.setblocking(False)
        try:
            self.close()
            with anyio.move_on_after(grace):
                await anyio.wait_readable(wait_on)
                return True
            return False
        finally:
            wait_on.close()

    def flush(self) -> None:
        """In the writer thread: write what is queued, a batch per run of events between drops."""
        if self._finished:
            return
        self.scheduled = False  # before draining: a later put schedules again
        closed = self._closed  # read before draining: nothing is put after closing
        pop = self._pending.popleft
        items = [pop() for _ in range(len(self._pending))]  # at least that many: only we take
        batches: list[tuple[int, list[bytes]]]  # (lost before, events)
        if self._marks == self._marks_taken:  # no drop among them: the common case, in C
            batches = [(self._failed, cast("list[bytes]", items))]
            size = sum(map(len, batches[0][1]))
        else:
            batches = [(self._failed, [])]
            size = 0
            for item in items:
                if isinstance(item, int):
                    batches.append((item, []))
                    self._marks_taken += 1
                else:
                    batches[-1][1].append(item)
                    size += len(item)
        self._failed = 0
        for i, (lost, events) in enumerate(batches):
            end = closed and i == len(batches) - 1
            if events or lost or end:
                self._write(events, lost, end)
        self._taken += size
        if closed:
            self._finished = True
            self._writer.close()
            signal = self._signal
            if signal is not None:
                try:
                    signal.send(b"\0")
                except OSError:
                    pass  # the run stopped waiting
                finally:
                    signal.close()


class EmitExporter:
    """A runtime's one writer thread for its runs' event streams, started on the first emit.

    Args:
        linger: seconds the thread waits after a wake-up before it writes.
        max_pending: bytes of encoded emits each run's outbox holds at most.
    """

    def __init__(self, *, linger: float = LINGER, max_pending: int = MAX_PENDING_BYTES) -> None:
        self.linger = linger
        self.max_pending = max_pending
        self._ready: queue.SimpleQueue[Outbox | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def outbox(self, writer: EventStreamWriter, run_id: str) -> Outbox:
        """A new outbox for one attempt of ``run_id``, written with ``writer``."""
        return Outbox(self, writer, run_id, self.max_pending)

    def schedule(self, box: Outbox) -> None:
        """Have the thread flush ``box`` soon (starting the thread if needed). Never blocks."""
        if self._thread is None or not self._thread.is_alive():  # a forked child has none
            self._ready = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=self._work, args=(self._ready,), name="actorflow-emits", daemon=True
            )
            self._thread.start()
        self._ready.put(box)

    def _work(self, ready: queue.SimpleQueue[Outbox | None]) -> None:
        stop = False
        while not stop:
            first = ready.get()
            if first is None:
                return
            if self.linger and not first.closing:  # an ending run waits for its last batch
                time.sleep(self.linger)
            boxes = {first: None}  # in scheduling order, each once
            while True:
                try:
                    box = ready.get_nowait()
                except queue.Empty:
                    break
                if box is None:
                    stop = True  # after flushing what came before it
                    break
                boxes[box] = None
            for box in boxes:
                try:
                    box.flush()
                except Exception as exc:  # the thread serves every run: it never dies of one
                    _log.warning("emit_stream_failed", run_id=box.run_id, error=error_message(exc))

    async def aclose(self, grace: float) -> None:
        """Flush what is queued and stop the thread, waiting for it at most ``grace`` seconds.

        A thread stuck in a store call is left behind (a daemon thread), with a warning.
        """
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._ready.put(None)
        await anyio.to_thread.run_sync(thread.join, grace)
        if thread.is_alive():
            _log.warning("emit_writer_stuck", waited=grace)
