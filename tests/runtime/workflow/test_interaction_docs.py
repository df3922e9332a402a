"""The streaming example of docs/interaction.md runs and prints what the page says."""

from __future__ import annotations

from typing import Any

from tests.snippets import python_blocks

HEADING = "## Streaming: emit and watch"


async def test_the_streaming_example_runs_and_prints_what_the_page_shows() -> None:
    (code,) = python_blocks("interaction.md", HEADING)
    namespace: dict[str, Any] = {"__name__": "docs_interaction"}
    # dont_inherit: this module's `from __future__ import annotations` would make the
    # block's annotations strings, which a module that is not imported cannot resolve
    exec(compile(code, "docs/interaction.md", "exec", dont_inherit=True), namespace)
    lines = await namespace["main"]()
    page = (python_blocks.__globals__["DOCS"] / "interaction.md").read_text()
    shown = page.split("It prints:\n\n```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert lines == shown
