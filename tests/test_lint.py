"""The house style holds on every commit: ruff (lint and format) and mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON_PATHS = ["actorflow", "tests", "benchmarks", "examples", "docs/_gen_api.py"]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["ruff", "check", *PYTHON_PATHS], id="ruff-check"),
        pytest.param(["ruff", "format", "--check", *PYTHON_PATHS], id="ruff-format"),
        pytest.param(["mypy"], id="mypy-strict"),  # files and strictness: pyproject.toml
    ],
)
def test_the_code_is_clean(command: list[str]) -> None:
    done = _run(str(BIN / command[0]), *command[1:])
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_merge_conflict_is_left_in_a_file() -> None:
    """A conflict marker once reached docs/storage.md through a merge."""
    suffixes = {".py", ".md", ".toml", ".txt", ".json", ".yml", ".yaml", ".cfg"}
    left = [
        f"{path.relative_to(ROOT)}:{number}"
        for top in ("actorflow", "tests", "benchmarks", "examples", "docs", ".ci")
        for path in (ROOT / top).rglob("*")
        if path.suffix in suffixes and path.is_file()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "======="
    ]
    left += [
        f"{name}:{number}"
        for name in ("README.md", "pyproject.toml")
        for number, line in enumerate((ROOT / name).read_text().splitlines(), 1)
        if line.startswith(("<<<<<<< ", ">>>>>>> "))
    ]
    assert left == []
