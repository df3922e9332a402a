"""The checkpoint actor: writes each run's snapshots off the run's path.

A run hands over a snapshot already built from its records (so capture costs
the run only building a frozen struct); requests that queue up while a write
is in flight coalesce into the newest one. The actor writes a snapshot at log
position ``p`` only after the log is durable through ``p``; encoding,
compression, checksums and the store's I/O all happen here. The one
exception is a run's final snapshot: the run's own task writes it
(``write_final``), the same way, at once. Snapshots still queued then are
superseded by it and dropped, except phase ends, which the actor writes after
the run has returned (``wait_idle`` waits for them). A failed write is
reported (``checkpoint_failed``) and never stops the run.

What a run hands over is a ``Capture``: the snapshot's open part and how far
into the run's journal of settled entries it reaches. The queue turns it into
the stored snapshot: the settled entries since the last history chunk go
inline, or, once they are due, into a new chunk (``HistoryWriter``), so each
snapshot costs what changed since the one before.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.runtime.actors import Actor, handler
from actorflow.runtime.workflow._triggers import KEPT_TRIGGERS
from actorflow.storage import HistoryWriter, LogWindow, keeps_every, with_history

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.workflow._otel import RunTrace
    from actorflow.runtime.workflow._replay import Capture
    from actorflow.storage import (
        ChunkRef,
        HistoryEntry,
        LogWriter,
        RetentionPolicy,
        Snapshot,
        Store,
    )

__all__ = ["CheckpointQueue", "Checkpointer"]

_log = get_logger("actorflow.checkpoint")


class CheckpointQueue:
    """One run's snapshots waiting to be written.

    A newer request replaces a waiting one, unless the waiting one marks a
    phase end (or the run's final state) at an earlier position: those stay
    to fork from and inspect. A request at the position of the previous one
    adds nothing and is dropped (a phase start right after a phase end), unless
    it is a phase end or a final state, which then replaces the waiting one.
    """

    def __init__(
        self,
        *,
        store: Store,
        writer: LogWriter,
        emit: Callable[..., None],
        journal: list[HistoryEntry],
        journal_at: list[int],
        history: ChunkRef | None,
        run_id: str,
        fresh: bool = False,
    ) -> None:
        self.store = store
        self.fresh = fresh
        """The run had no snapshot before this attempt: every one it has is in ``triggers``."""
        self.triggers: list[str] = []
        """The triggers of the snapshots written, in the order they were."""
        self.writer = writer
        self.emit = emit
        self.pending: list[Capture] = []
        self.written = 0
        self.failed = 0
        self.bytes_written = 0
        self.write_seconds = 0.0
        self.last_error: BaseException | None = None
        self._last_position = -1
        self._draining = False
        # made only when someone waits for a drain in progress
        self._idle: anyio.Event | None = None
        self._journal = journal
        self._journal_at = journal_at
        self._history = HistoryWriter(store, run_id, history)
        # (journal length, newest chunk) after each chunk written, oldest first:
        # a snapshot names the newest chunk that holds nothing after it
        self._chunked: list[tuple[int, ChunkRef | None]] = [(0, history)]
        # one snapshot at a time decides on chunks (the final one may overtake the actor)
        self._heads = anyio.Lock()
        self.trace: RunTrace | None = None  # the attempt's, when tracing is on

    def offer(self, capture: Capture, send: Callable[[object], None]) -> None:
        """Queue ``capture``, coalescing with a waiting one where that loses nothing."""
        snapshot = capture.snapshot
        if snapshot.position == self._last_position and snapshot.trigger not in KEPT_TRIGGERS:
            return
        self._last_position = snapshot.position
        last = self.pending[-1].snapshot if self.pending else None
        if last is not None and (
            last.trigger not in KEPT_TRIGGERS or last.position == snapshot.position
        ):
            # a newer view of the same position holds all the older one did
            self.pending[-1] = capture
        else:
            self.pending.append(capture)
        if not self._draining:
            self._draining = True
            send(_Drain(self))

    async def write_final(self, capture: Capture) -> None:
        """Write a run's final snapshot now, whatever is queued.

        Queued snapshots that are not kept, or are at its position, are
        superseded by it and dropped; earlier phase ends stay queued for the
        checkpoint actor, which writes them after the run has returned.
        """
        position = capture.snapshot.position
        self.pending = [
            c
            for c in self.pending
            if c.snapshot.trigger in KEPT_TRIGGERS and c.snapshot.position < position
        ]
        self._last_position = position
        await self.write(capture)

    @property
    def queued(self) -> int:
        """Snapshots waiting to be written."""
        return len(self.pending)

    async def wait_idle(self) -> None:
        """Wait until every queued snapshot was written (or failed)."""
        if self._draining:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    def take_next(self) -> Capture | None:
        """The next snapshot to write, or None (the queue is then idle and its waiters wake)."""
        if self.pending:
            return self.pending.pop(0)
        self._draining = False
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.set()
        return None

    def keeps_every(self, policy: RetentionPolicy) -> bool:
        """Whether ``policy`` keeps all the run's snapshots: a prune would only read.

        Known only when the run had none before this attempt and no write failed.
        """
        return self.fresh and not self.failed and keeps_every(policy, self.triggers)

    async def write(self, capture: Capture) -> int | None:
        """Write ``capture`` once the log is durable through it; its stored size, or None.

        A failure is counted and reported (``checkpoint_failed``), never raised.
        """
        started = time.perf_counter()
        trace = self.trace
        started_ns = time.time_ns() if trace is not None else 0
        snapshot = capture.snapshot
        try:
            # Never a snapshot ahead of the durable log it summarises.
            await self.writer.flush(snapshot.position)
            async with self._heads:
                chunked = self._history.bytes_written
                head = await self._head(capture)
                chunked = self._history.bytes_written - chunked
            info = await self.store.write_snapshot(head)
        except Exception as exc:
            self.failed += 1
            self.last_error = exc
            if trace is not None:
                trace.checkpoint(started_ns, None, time.perf_counter() - started, exc)
            self.emit(
                "checkpoint_failed",
                snapshot_id=snapshot.snapshot_id,
                position=snapshot.position,
                error=describe(exc),
                level="warning",
            )
            return None
        self.written += 1
        self.triggers.append(snapshot.trigger)
        self.bytes_written += info.stored_size + chunked
        self.write_seconds += time.perf_counter() - started
        if trace is not None:
            size = info.stored_size + chunked
            trace.checkpoint(started_ns, size, time.perf_counter() - started, None)
        self.emit(
            "checkpoint_saved",
            snapshot_id=info.snapshot_id,
            position=info.position,
            trigger=snapshot.trigger,
            phase=snapshot.phase,
            size=info.stored_size,
            raw_size=info.raw_size,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return info.stored_size + chunked

    async def _head(self, capture: Capture) -> Snapshot:
        """The snapshot to store: it names the newest chunk it may, and the settled entries
        after that chunk by their log records (a window) where it can, else inline.

        Entries that are due go to chunks first, cut where queued snapshots
        end too: the run's final snapshot is written before the phase ends
        queued ahead of it, and each of those must find a chunk that holds
        nothing after it, or it would carry the whole run.
        """
        covered = capture.settled
        position = capture.snapshot.position
        chunked = self._chunked
        start = chunked[-1][0]
        if covered > start:
            # queued ahead of this one (only the final snapshot has any): in order
            queued: list[tuple[int, int]] = []
            for waiting in self.pending:
                if waiting.settled >= covered:
                    break
                if waiting.settled > start and (not queued or waiting.settled > queued[-1][0]):
                    queued.append((waiting.settled, waiting.snapshot.position))
            for end, at in (*queued, (covered, position)):
                entries = self._journal[start:end]
                if HistoryWriter.due(entries, self._span(start, end, at)):
                    chunked.append((end, await self._history.flush(entries)))
                    start = end
        i = len(chunked) - 1
        while chunked[i][0] > covered:  # an older snapshot written after a newer one
            i -= 1
        start, ref = chunked[i]
        entries = self._journal[start:covered]
        window_start = self._window_start(start, covered)
        if window_start is None:
            return with_history(capture.snapshot, entries, ref)
        # the log holds the records; the inbox seqs they took travel inline
        taken = [e for e in entries if isinstance(e, int)]
        head = with_history(capture.snapshot, taken, ref)
        window = LogWindow(start=window_start, entries=len(entries) - len(taken))
        return msgspec.structs.replace(head, window=window)

    def _window_start(self, start: int, end: int) -> int | None:
        """The log position where journal entries ``start:end`` begin, if a window may name
        them: every one (inbox seqs aside) has a known position. None also for no records."""
        first: int | None = None
        for entry, at in zip(self._journal[start:end], self._journal_at[start:end], strict=True):
            if isinstance(entry, int):
                continue
            if at < 0:
                return None
            if first is None:
                first = at
        return first

    def _span(self, start: int, end: int, position: int) -> int | None:
        """How many log records journal entries ``start:end`` lie in, up to ``position``;
        None if a window may not name them."""
        first = self._window_start(start, end)
        return None if first is None else position - first


class _Drain:
    __slots__ = ("queue",)

    def __init__(self, queue: CheckpointQueue) -> None:
        self.queue = queue


class CheckpointStats(msgspec.Struct):
    """What the checkpoint actor has done since it started."""

    written: int = 0
    failed: int = 0
    bytes_written: int = 0


class Checkpointer(Actor):
    """Writes snapshots for every run of its runtime."""

    __actorflow_name__ = "actorflow.Checkpointer"
    role = "checkpointer"
    state: CheckpointStats

    @handler(_Drain)
    async def drain(self, request: _Drain) -> None:
        queue = request.queue
        try:
            while (capture := queue.take_next()) is not None:
                await self._write(queue, capture)
        except BaseException:
            queue.pending.clear()
            queue.take_next()
            raise

    async def _write(self, queue: CheckpointQueue, capture: Capture) -> None:
        size = await queue.write(capture)
        if size is None:
            self.state.failed += 1
        else:
            self.state.written += 1
            self.state.bytes_written += size
