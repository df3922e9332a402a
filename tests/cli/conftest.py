"""A real file store, written as the engine writes it, for the commands to read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from tests.cli.stored import populate

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def store_dir(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    anyio.run(populate, path)
    return path
