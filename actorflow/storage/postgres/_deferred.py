"""Snapshots and history chunks that travel with a run's next log append.

A run in ``sync`` durability makes each phase's end durable with one commit,
and the checkpoint actor then writes the phase's snapshot and, now and then,
a history chunk: two or three more transactions for every one the run
needs, competing with its next append for the server and the two cores.
For a run this store owns, those writes wait here instead, sealed, and go
into the statement of the run's next append: one round trip, one WAL flush.

A run that appends nothing more for a while (it waits for a signal, or
ended) does not keep them long: a thread writes what has waited
``delay`` seconds, in a commit of its own. Until then only this store
object sees them, because it writes a run's waiting rows before any of its
calls that reads or changes that run's snapshots or blobs. A crash of the
process may lose them, as a power loss may lose a snapshot written without a
sync: the run's log still holds everything they summarise.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actorflow._log import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._records import SnapshotInfo

__all__ = ["DeferredWrites", "Flusher", "Waiting"]

_log = get_logger(__name__)


@dataclass
class Waiting:
    """One run's rows waiting for its next append."""

    epoch: int
    """The claim's epoch they were written under: under another, they are dropped."""
    snapshots: list[tuple[SnapshotInfo, bytes]] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    since: float = 0.0

    @property
    def size(self) -> int:
        return sum(len(d) for _, d in self.snapshots) + sum(map(len, self.blobs.values()))

    def merge_before(self, later: Waiting) -> None:
        """Put this (an older batch handed back) ahead of ``later``'s rows, in place."""
        later.snapshots[:0] = self.snapshots
        for address, data in self.blobs.items():
            later.blobs.setdefault(address, data)
        later.since = min(later.since, self.since)


class DeferredWrites:
    """Rows waiting per run; every method may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, Waiting] = {}

    def add_snapshot(self, run_id: str, epoch: int, info: SnapshotInfo, sealed: bytes) -> bool:
        """Queue a snapshot written under ``epoch``; False if rows of another epoch wait."""
        with self._lock:
            waiting = self._waiting(run_id, epoch)
            if waiting is not None:
                waiting.snapshots.append((info, sealed))
            return waiting is not None

    def add_blob(self, run_id: str, epoch: int, address: str, sealed: bytes) -> bool:
        """Queue a blob written under ``epoch``; False if rows of another epoch wait."""
        with self._lock:
            waiting = self._waiting(run_id, epoch)
            if waiting is not None:
                waiting.blobs.setdefault(address, sealed)
            return waiting is not None

    def _waiting(self, run_id: str, epoch: int) -> Waiting | None:
        waiting = self._runs.get(run_id)
        if waiting is None:
            waiting = self._runs[run_id] = Waiting(epoch=epoch, since=time.monotonic())
        return waiting if waiting.epoch == epoch else None

    def has(self, run_id: str) -> bool:
        return run_id in self._runs

    def take(self, run_id: str) -> Waiting | None:
        """The run's waiting rows, no longer waiting (hand them back if they were not written)."""
        with self._lock:
            return self._runs.pop(run_id, None)

    def give_back(self, run_id: str, waiting: Waiting) -> None:
        """Rows :meth:`take` handed out whose write did not happen: first in line again."""
        with self._lock:
            later = self._runs.get(run_id)
            if later is None:
                self._runs[run_id] = waiting
            elif later.epoch == waiting.epoch:
                waiting.merge_before(later)
            # else a newer claim's rows wait: the older ones could never be written

    def drop(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def runs(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def due(self, older_than: float) -> list[str]:
        """The runs whose rows have waited since before ``older_than`` (monotonic)."""
        with self._lock:
            return [r for r, w in self._runs.items() if w.since <= older_than]


class Flusher:
    """A thread that writes rows that waited ``delay`` seconds, through ``flush(run_id)``."""

    def __init__(self, delay: float, flush: Callable[[str], None], waiting: DeferredWrites) -> None:
        self.delay = delay
        self._flush = flush
        self._waiting = waiting
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._asleep = False  # waiting with no rows to look after: only a poke wakes it

    def poke(self) -> None:
        """Rows are waiting: make sure the thread looks (started on first use).

        A thread already waiting out a delay finds them then: waking it at
        every snapshot would cost a thread switch each.
        """
        with self._wake:
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(
                    target=self._loop, name="actorflow-pg-deferred", daemon=True
                )
                self._thread.start()
            elif self._asleep:
                self._asleep = False
                self._wake.notify()

    def stop(self) -> None:
        """Stop the thread (blocking: from a worker thread); waiting rows stay waiting."""
        with self._wake:
            self._stopping = True
            thread, self._thread = self._thread, None
            self._wake.notify()
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._wake:
                if self._stopping:
                    return
                pending = self._waiting.runs()
                if not pending:
                    self._asleep = True
                    self._wake.wait()
                    self._asleep = False
                    continue
                due = self._waiting.due(time.monotonic() - self.delay)
                if not due:
                    self._wake.wait(self.delay)
                    continue
            for run_id in due:
                try:
                    self._flush(run_id)
                except Exception as exc:  # the rows are lost; the log still has everything
                    _log.warning("postgres_deferred_write_failed", run_id=run_id, error=str(exc))
