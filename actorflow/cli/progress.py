"""For workflows the command line runs in its own process: their phases, with totals, on its bar.

The commands that run workflows in their own process (``start``, ``recover``,
``fork``, ``resume``, ``demo``) show a progress bar on a terminal, with each
run's phases and checkpoints read from its events. A workflow running there
may also say how far along a phase it is:
``progress().phase("analyse", total=len(files), unit="files")``, then
``progress().advance()`` as each unit is done (the demo's orchestrator does).
Anywhere else, :func:`progress` is a sink that ignores it, so the same
workflow runs silently in tests, under a worker, or on another host; a program
may install its own :class:`ProgressSink` with :func:`use_progress`.
"""

from __future__ import annotations

from actorflow.cli._progress import ProgressSink, progress, use_progress

__all__ = ["ProgressSink", "progress", "use_progress"]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
