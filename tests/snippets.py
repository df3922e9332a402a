"""The code blocks of the docs, so tests run what the docs show."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def python_blocks(page: str, heading: str) -> list[str]:
    """The ```python blocks of ``docs/<page>`` in the section under ``heading`` (a whole line).

    The section ends at the next heading of the same level or higher (a line
    starting with ``#`` inside a code block is no heading).
    """
    level = len(heading) - len(heading.lstrip("#"))
    blocks: list[str] = []
    inside, code = False, ""
    fence: str | None = None
    for line in (DOCS / page).read_text().splitlines(keepends=True):
        if fence is not None:  # in a code block
            if line.rstrip() == "```":
                if fence == "python" and inside:
                    blocks.append(code)
                fence = None
            else:
                code += line
        elif line.startswith("```"):
            fence, code = line[3:].strip(), ""
        elif line.rstrip() == heading:
            inside = True
        elif inside and line.startswith("#") and len(line) - len(line.lstrip("#")) <= level:
            break
    assert blocks, f"docs/{page} has no python block under {heading!r}"
    return blocks
