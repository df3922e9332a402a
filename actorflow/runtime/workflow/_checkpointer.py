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

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage import LogWriter, Snapshot, Store

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

    def __init__(self, *, store: Store, writer: LogWriter, emit: Callable[..., None]) -> None:
        self.store = store
        self.writer = writer
        self.emit = emit
        self.pending: list[Snapshot] = []
        self.written = 0
        self.failed = 0
        self.bytes_written = 0
        self.write_seconds = 0.0
        self.last_error: BaseException | None = None
        self._last_position = -1
        self._draining = False
        # made only when someone waits for a drain in progress
        self._idle: anyio.Event | None = None

    def offer(self, snapshot: Snapshot, send: Callable[[object], None]) -> None:
        """Queue ``snapshot``, coalescing with a waiting one where that loses nothing."""
        if snapshot.position == self._last_position and snapshot.trigger not in KEPT_TRIGGERS:
            return
        self._last_position = snapshot.position
        last = self.pending[-1] if self.pending else None
        if last is not None and (
            last.trigger not in KEPT_TRIGGERS or last.position == snapshot.position
        ):
            # a newer view of the same position holds all the older one did
            self.pending[-1] = snapshot
        else:
            self.pending.append(snapshot)
        if not self._draining:
            self._draining = True
            send(_Drain(self))

    async def write_final(self, snapshot: Snapshot) -> None:
        """Write a run's final snapshot now, whatever is queued.

        Queued snapshots that are not kept, or are at its position, are
        superseded by it and dropped; earlier phase ends stay queued for the
        checkpoint actor, which writes them after the run has returned.
        """
        self.pending = [
            s for s in self.pending if s.trigger in KEPT_TRIGGERS and s.position < snapshot.position
        ]
        self._last_position = snapshot.position
        await self.write(snapshot)

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

    def take_next(self) -> Snapshot | None:
        """The next snapshot to write, or None (the queue is then idle and its waiters wake)."""
        if self.pending:
            return self.pending.pop(0)
        self._draining = False
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.set()
        return None

    async def write(self, snapshot: Snapshot) -> int | None:
        """Write ``snapshot`` once the log is durable through it; its stored size, or None.

        A failure is counted and reported (``checkpoint_failed``), never raised.
        """
        started = time.perf_counter()
        try:
            # Never a snapshot ahead of the durable log it summarises.
            await self.writer.flush(snapshot.position)
            info = await self.store.write_snapshot(snapshot)
        except Exception as exc:
            self.failed += 1
            self.last_error = exc
            self.emit(
                "checkpoint_failed",
                snapshot_id=snapshot.snapshot_id,
                position=snapshot.position,
                error=describe(exc),
                level="warning",
            )
            return None
        self.written += 1
        self.bytes_written += info.stored_size
        self.write_seconds += time.perf_counter() - started
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
        return info.stored_size


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
            while (snapshot := queue.take_next()) is not None:
                await self._write(queue, snapshot)
        except BaseException:
            queue.pending.clear()
            queue.take_next()
            raise

    async def _write(self, queue: CheckpointQueue, snapshot: Snapshot) -> None:
        size = await queue.write(snapshot)
        if size is None:
            self.state.failed += 1
        else:
            self.state.written += 1
            self.state.bytes_written += size
