"""The examples of docs/interaction.md run as shown, on both event loops."""

from __future__ import annotations

import pytest

from tests.snippets import python_blocks

SECTIONS = [
    "## Signals: messages into a run",
    "## Waits that expire",
    "## Updates: a signal with a reply",
]


@pytest.mark.parametrize("heading", SECTIONS)
async def test_the_example_of_each_section_runs(heading: str) -> None:
    (code,) = python_blocks("interaction.md", heading)
    namespace: dict[str, object] = {"__name__": f"docs_interaction_{len(heading)}"}
    exec(compile(code, f"docs/interaction.md {heading}", "exec"), namespace)
    main = namespace["main"]
    assert callable(main)
    await main()
