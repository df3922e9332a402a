"""The checkpoint actor: writes each run's snapshots off the run's path.

A run hands over a snapshot already built from its records (so capture costs
the run only building a frozen struct); requests that queue up while a write
is in flight coalesce into the newest one. The actor writes a snapshot at log
position ``p`` only after the log is durable through ``p``; encoding,
compression, checksums and the store's I/O all happen here. A failed write
is reported (``checkpoint_failed``) and never stops the run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow.runtime._actor import Actor, handler

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage import LogWriter, Snapshot, Store

__all__ = ["CheckpointQueue", "Checkpointer"]

_log = get_logger("actorflow.checkpoint")


class CheckpointQueue:
    """One run's pending snapshot: at most one waits, newer requests replace it."""

    def __init__(self, *, store: Store, writer: LogWriter, emit: Callable[..., None]) -> None:
        self.store = store
        self.writer = writer
        self.emit = emit
        self.pending: Snapshot | None = None
        self.written = 0
        self.failed = 0
        self.last_error: BaseException | None = None
        self._busy = 0
        self._idle = anyio.Event()
        self._idle.set()

    def offer(self, snapshot: Snapshot, send: Callable[[Any], None]) -> None:
        """Queue ``snapshot``; if one is already waiting, this one replaces it."""
        coalesced = self.pending is not None
        self.pending = snapshot
        if coalesced:
            return
        if self._busy == 0:
            self._idle = anyio.Event()
        self._busy += 1
        send(_Drain(self))

    async def wait_idle(self) -> None:
        """Wait until every queued snapshot was written (or failed)."""
        await self._idle.wait()

    def _done(self) -> None:
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()


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
            snapshot = queue.pending
            queue.pending = None
            if snapshot is not None:
                await self._write(queue, snapshot)
        finally:
            queue._done()

    async def _write(self, queue: CheckpointQueue, snapshot: Snapshot) -> None:
        started = time.perf_counter()
        try:
            # Never a snapshot ahead of the durable log it summarises.
            await queue.writer.flush(snapshot.position)
            info = await queue.store.write_snapshot(snapshot)
        except Exception as exc:
            queue.failed += 1
            queue.last_error = exc
            self.state.failed += 1
            queue.emit(
                "checkpoint_failed",
                snapshot_id=snapshot.snapshot_id,
                position=snapshot.position,
                error=f"{type(exc).__name__}: {exc}",
                level="warning",
            )
            return
        queue.written += 1
        self.state.written += 1
        self.state.bytes_written += info.stored_size
        queue.emit(
            "checkpoint_saved",
            snapshot_id=info.snapshot_id,
            position=info.position,
            trigger=snapshot.trigger,
            phase=snapshot.phase,
            size=info.stored_size,
            raw_size=info.raw_size,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
