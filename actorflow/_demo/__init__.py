"""The `actorflow demo` workflow: a code-review team over a source tree.

The command line reaches it only through the ``demo`` command module
(``actorflow.cli._commands_demo``), which runs it (a runtime, the progress bar,
the summary table) with what is exported here: the workflow, its input and
result, and the folder it reviews by default. Importing the package registers
the demo's workflow and agent classes. Its orchestrator reports its phases,
with totals, to the command line's progress bar (``actorflow.cli.progress``).
"""

from __future__ import annotations

from actorflow._demo._analysis import default_root
from actorflow._demo._workflow import ReviewInput, ReviewSummary, ReviewTeam

__all__ = ["ReviewInput", "ReviewSummary", "ReviewTeam", "default_root"]
