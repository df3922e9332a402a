"""Where each queue of a store stands: its depth, its runs' waits, what runs against its cap."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from actorflow.storage import RunStatus

if TYPE_CHECKING:
    from collections.abc import Iterable

    from actorflow.runtime.workflow._queues import Queue
    from actorflow.storage import RunManifest, Store

__all__ = ["QueueStats", "count_queues", "queue_stats"]


class QueueStats(msgspec.Struct, frozen=True, kw_only=True):
    """One queue's runs as its store holds them now (``queue_stats``, ``runtime.queue_stats()``).

    Attributes:
        name: the queue.
        queued: its runs waiting to start (the queue's depth).
        running: its runs being driven now.
        max_concurrent: its cap, when the queue was declared to the reader
            (``None``: no cap, or not declared there).
        per_minute: its rate, likewise.
        oldest_wait: seconds the longest-waiting queued run has waited (since
            it was submitted, by the submitter's clock); 0.0 if none waits.
        mean_wait: the mean of the queued runs' waits so far, in seconds.
        declared: whether the reader was given the queue's declaration.
        by_priority: its queued runs per priority.

    .. versionadded:: 0.6
    """

    name: str
    queued: int = 0
    running: int = 0
    max_concurrent: int | None = None
    per_minute: int | None = None
    oldest_wait: float = 0.0
    mean_wait: float = 0.0
    declared: bool = False
    by_priority: dict[int, int] = msgspec.field(default_factory=dict)


async def queue_stats(
    store: Store, queues: Iterable[Queue] = (), *, now: float | None = None
) -> dict[str, QueueStats]:
    """Each queue's depth, its queued runs' waits and its running runs against its cap, by name.

    Reads the manifests of the store's unfinished runs (one listing). Every
    queue a run names is there, and every queue of ``queues`` (the declared
    ones, for their caps), even with no run.

    Args:
        store: the store to read.
        queues: declared queues (``runtime.queues``), whose caps are reported.
        now: the time the waits are measured to (default the wall clock).
    """
    manifests = await store.list_runs(status=[RunStatus.QUEUED, RunStatus.RUNNING])
    return count_queues(manifests, queues, now=time.time() if now is None else now)


def count_queues(
    manifests: Iterable[RunManifest], queues: Iterable[Queue] = (), *, now: float
) -> dict[str, QueueStats]:
    """:func:`queue_stats` of manifests already read (a reader that keeps a listing).

    Runs of other statuses, and runs of no queue, are passed over.
    """
    declared = {q.name: q for q in queues}
    waits: dict[str, list[float]] = {name: [] for name in declared}
    running: dict[str, int] = dict.fromkeys(declared, 0)
    priorities: dict[str, dict[int, int]] = {name: {} for name in declared}
    for m in manifests:
        if m.queue is None or m.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            continue
        waits.setdefault(m.queue, [])
        running.setdefault(m.queue, 0)
        by_priority = priorities.setdefault(m.queue, {})
        if m.status is RunStatus.QUEUED:
            waits[m.queue].append(max(now - m.created, 0.0))
            by_priority[m.priority] = by_priority.get(m.priority, 0) + 1
        else:
            running[m.queue] += 1
    out: dict[str, QueueStats] = {}
    for name in sorted(waits):
        waiting = waits[name]
        queue = declared.get(name)
        out[name] = QueueStats(
            name=name,
            queued=len(waiting),
            running=running[name],
            max_concurrent=queue.max_concurrent if queue is not None else None,
            per_minute=queue.per_minute if queue is not None else None,
            oldest_wait=max(waiting, default=0.0),
            mean_wait=sum(waiting) / len(waiting) if waiting else 0.0,
            declared=queue is not None,
            by_priority=priorities[name],
        )
    return out
