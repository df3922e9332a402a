"""The `actorflow demo` workflow: a code-review team over a source tree.

The command line uses what is exported here: the function ``demo`` calls, the
summary table, and the progress display that ``recover`` shows too. Importing
the package registers the demo's workflow and agent classes.
"""

from __future__ import annotations

from actorflow._demo._progress import live_progress, watch_progress
from actorflow._demo._run import new_run_id, run_demo, summary_table
from actorflow._demo._workflow import ReviewSummary

__all__ = [
    "ReviewSummary",
    "live_progress",
    "new_run_id",
    "run_demo",
    "summary_table",
    "watch_progress",
]
