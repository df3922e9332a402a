"""The examples of docs/interaction.md run as shown, on both event loops."""

from __future__ import annotations

import sys
import types

import anyio
import pytest

from tests.snippets import python_blocks

SECTIONS = [
    "## Signals: messages into a run",
    "## Waits that expire",
    "## Updates: a signal with a reply",
    "## Queries",
    "## Child runs",
]


@pytest.mark.parametrize("heading", SECTIONS)
async def test_the_example_of_each_section_runs(
    heading: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (code,) = python_blocks("interaction.md", heading)
    # a module of its own, as a script has: annotations resolve through it
    module = types.ModuleType(f"docs_interaction_{SECTIONS.index(heading)}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, f"docs/interaction.md {heading}", "exec"), module.__dict__)
    with anyio.fail_after(30):
        await module.main()
