"""How the user ran ``actorflow``, so the commands the CLI suggests run as typed.

A hint (``resume RUN --response TEXT``, ``recover RUN``...) names the program
as the user ran it and repeats the ``--app`` and ``--store`` the command was
given: :func:`given` records them once per command, :func:`suggest` writes a
command line with them, a store URL's password left out (``printable_location``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from actorflow.storage import printable_location

__all__ = ["Given", "given", "program", "suggest"]


@dataclass(frozen=True)
class Given:
    """The ``--app`` and ``--store`` a command was given on its command line."""

    app: str | None = None
    store: str | None = None


_given: ContextVar[Given | None] = ContextVar("actorflow_cli_given", default=None)


def given(*, app: str | None = None, store: str | None = None) -> None:
    """Record the ``--app`` and ``--store`` this command was given, for :func:`suggest`."""
    _given.set(Given(app=app, store=store))


def suggest(*args: str, app: bool = True) -> str:
    """A command line to suggest: the program, ``args``, and the ``--app``/``--store`` given.

    Every part is quoted for the shell, so it runs as printed, but for a
    store URL's password (see ``actorflow.storage.printable_location``). ``app=False`` leaves
    ``--app`` out, for a command that takes none.
    """
    options = _given.get() or Given()
    parts = [*args]
    if app and options.app is not None:
        parts += ["--app", options.app]
    if options.store is not None:
        parts += ["--store", printable_location(options.store)]
    return " ".join([program(), *(shlex.quote(p) for p in parts)])


def program() -> str:
    """The command that runs this CLI: ``actorflow`` if it is on ``PATH``, else the path typed.

    ``.venv/bin/actorflow demo`` suggests ``.venv/bin/actorflow runs``, and
    ``python -m actorflow`` suggests ``python -m actorflow runs`` (with this
    interpreter), so a hint never names a command the shell cannot find.
    """
    argv0 = sys.argv[0] if sys.argv else ""
    path = Path(argv0)
    if path.name == "actorflow":
        on_path = shutil.which("actorflow")
        if on_path is not None and _same(on_path, argv0):
            return "actorflow"
        return shlex.quote(argv0)
    if path.name == "__main__.py" and path.parent.name == "actorflow":
        return f"{shlex.quote(_short(sys.executable))} -m actorflow"
    return "actorflow"


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _short(executable: str) -> str:
    # A path under the current folder reads better relative (`.venv/bin/python`).
    relative = os.path.relpath(executable)
    return relative if not relative.startswith("..") else executable
