"""The handle table of one runtime: a tracker for every run it drives or follows.

Live runs' trackers are all kept; a finished run's stays among the newest
:data:`KEPT_FINISHED_HANDLES`, so that ``Runtime.handle`` finds the runs it
just ran while a service that runs for months holds a bounded table.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from actorflow.errors import RunNotFoundError

if TYPE_CHECKING:
    from collections.abc import Container

    from actorflow.runtime.workflow._handle import RunHandle, RunTracker

__all__ = ["KEPT_FINISHED_HANDLES", "RunTable"]

KEPT_FINISHED_HANDLES = 1000
"""How many finished runs' handles a runtime keeps (live runs' handles are all kept)."""


class RunTable:
    """The trackers of a runtime's runs by run id: every live one, the newest finished ones."""

    def __init__(self) -> None:
        self._trackers: dict[str, RunTracker] = {}
        self._finished: collections.deque[RunTracker] = collections.deque()

    def add(self, tracker: RunTracker) -> None:
        """Keep ``tracker`` as its run's (in place of an earlier attempt's)."""
        self._trackers[tracker.run_id] = tracker

    def tracker(self, run_id: str) -> RunTracker | None:
        """The tracker of run ``run_id`` if the table has one (live or kept finished)."""
        return self._trackers.get(run_id)

    def live(self, run_id: str) -> RunTracker | None:
        """The tracker of run ``run_id`` if it is live here (driven or followed)."""
        tracker = self._trackers.get(run_id)
        return tracker if tracker is not None and not tracker.done else None

    def handle(self, run_id: str) -> RunHandle:
        """The handle of run ``run_id``.

        Raises:
            RunNotFoundError: the table has no tracker for that run.
        """
        try:
            return self._trackers[run_id].handle
        except KeyError:
            raise RunNotFoundError(run_id) from None

    def driven(self, followed: Container[str]) -> list[RunTracker]:
        """The trackers of the live runs, but for those in ``followed`` (driven elsewhere)."""
        return [t for t in self._trackers.values() if not t.done and t.run_id not in followed]

    def finished(self, tracker: RunTracker) -> None:
        """``tracker``'s run ended: keep it among the newest, forget the oldest beyond them."""
        self._finished.append(tracker)
        while len(self._finished) > KEPT_FINISHED_HANDLES:
            old = self._finished.popleft()
            if self._trackers.get(old.run_id) is old:
                del self._trackers[old.run_id]
