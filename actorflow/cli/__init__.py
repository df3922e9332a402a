"""The ``actorflow`` command line (also ``python -m actorflow``).

Commands that need only the store (``runs``, ``checkpoints``, ``show``,
``log``, ``validate``, ``diff``, ``prune``) live apart from those that run
workflows (``demo``; ``recover``, ``fork`` and ``resume`` on the user's app).
Exit codes are in :data:`EXIT_CODES`; ``docs/cli.md`` describes every command.
"""

from __future__ import annotations

from actorflow.cli._app import EXIT_CODES, app, exit_code_for, main

# Importing a command module registers its commands on `app`; `actorflow --help`
# lists them in this order.
# isort: off
from actorflow.cli import _commands_store, _commands_demo, _commands_run  # noqa: F401
from actorflow.cli import _commands_worker, _commands_inbox, _commands_ui  # noqa: F401
from actorflow.cli import _commands_replay, _commands_schedules  # noqa: F401
# isort: on

__all__ = ["EXIT_CODES", "app", "exit_code_for", "main"]
