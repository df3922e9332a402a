"""The `actorflow demo` workflow: a code-review team over a source tree.

The command line reaches it only through the ``demo`` command module
(``actorflow.cli._commands_demo``), which uses what is exported here: the
function ``demo`` calls and the summary table (also shown for a recovered
demo's result). Importing the package registers the demo's workflow and agent
classes. Its orchestrator reports its phases, with totals, to the CLI's
progress display (``actorflow.cli._progress``).
"""

from __future__ import annotations

from actorflow._demo._run import new_run_id, run_demo, summary_table
from actorflow._demo._workflow import ReviewSummary

__all__ = ["ReviewSummary", "new_run_id", "run_demo", "summary_table"]
