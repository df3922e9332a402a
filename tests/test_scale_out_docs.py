"""The example of docs/scale-out.md runs as shown, on both event loops."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

import anyio

from tests.snippets import python_blocks

if TYPE_CHECKING:
    import pytest


async def test_the_workers_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = python_blocks("scale-out.md", "## Workers that adopt orphaned runs")
    # a module of its own, as a script has: annotations resolve through it
    module = types.ModuleType("docs_scale_out_workers")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, "docs/scale-out.md workers", "exec"), module.__dict__)
    with anyio.fail_after(30):
        await module.main()
