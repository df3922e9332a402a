"""The docs keep up with the code: every public name is in the API reference."""

from __future__ import annotations

import importlib
import re
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


def test_the_docs_link_to_pages_that_exist() -> None:
    for page in [*DOCS.glob("*.md"), DOCS.parent / "README.md"]:
        for target in re.findall(r"\]\(((?:docs/)?[a-z_]+\.md)(?:#[^)]*)?\)", page.read_text()):
            path = DOCS / target if page.parent == DOCS else DOCS.parent / target
            assert path.exists(), f"{page.name} links to {target}, which does not exist"
