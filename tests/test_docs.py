"""The docs keep up with the code: every public name is in the API reference."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PUBLIC = (
    "actorflow",
    "actorflow.runtime",
    "actorflow.agents",
    "actorflow.storage",
    "actorflow.errors",
)


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_public_name_is_in_the_api_reference(module_name: str) -> None:
    api = (DOCS / "api.md").read_text()
    module = importlib.import_module(module_name)
    missing = [n for n in module.__all__ if f"`{n}`" not in api]
    assert not missing, f"run `python docs/_gen_api.py`: {module_name} names missing: {missing}"
