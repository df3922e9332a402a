"""How the user ran ``actorflow``, so the commands the CLI suggests run as typed."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["program"]


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
