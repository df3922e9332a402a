"""In a real browser: fork a run from a checkpoint with an agent's state edited, compare the two."""

from __future__ import annotations

import contextlib
import re
import threading
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import Runtime
from actorflow.runtime import RunEnded, watch_run
from actorflow.storage import FileStore
from tests.runtime.workflow.fork_flow import Ledger
from tests.ui.browser import chromium, needs_browser
from tests.ui.serving import serving

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

pytestmark = needs_browser


async def _ledger(path: str) -> None:
    async with Runtime(store=FileStore(path)) as runtime:
        await runtime.run(Ledger, "a", run_id="books")


async def _ended(path: str, run_id: str) -> None:
    store = FileStore(path)
    try:
        with anyio.fail_after(60):
            async with contextlib.aclosing(watch_run(store, run_id, poll_interval=0.02)) as events:
                async for event in events:
                    if isinstance(event, RunEnded):
                        return
    finally:
        await store.aclose()


def _beside_the_browser(fn: Callable[..., Awaitable[None]], *args: str) -> None:
    """``anyio.run(fn, *args)`` in a thread of its own: Playwright's loop holds this one."""
    done: list[bool] = []
    thread = threading.Thread(target=lambda: done.append(anyio.run(fn, *args) is None))
    thread.start()
    thread.join(timeout=90)
    assert done == [True]


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_fork_with_an_edit_and_compare_the_two_runs(tmp_path: Path, loop: str) -> None:
    path = str(tmp_path / "store")
    anyio.run(_ledger, path, backend=loop)
    app = "tests.runtime.workflow.fork_flow:make_runtime"
    errors: list[str] = []
    with serving("--store", path, "--app", app, "--loop", loop) as url, chromium() as browser:
        page = browser.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        base = re.sub(r"(https?://[^/]+).*", r"\1", page.url)
        page.goto(base + "/runs/books/checkpoints")
        row = page.locator("tr", has_text="phase_end").first  # the first phase's end
        row.locator("a.fork-here").click()
        editor = page.locator("fieldset[data-agent='clerk']")
        assert '"entries"' in editor.locator("textarea").input_value()
        editor.locator("input[type='checkbox']").check()
        editor.locator("textarea").fill('{"entries": "not a list"}')
        page.get_by_role("button", name="Start the fork").click()
        assert "entries" in page.locator(".form-error").inner_text()  # refused, field named

        editor = page.locator("fieldset[data-agent='clerk']")
        editor.locator("textarea").fill('{"entries": ["x"], "prefix": "> ", "pages": 1}')
        page.fill("[name='new_run_id']", "books-fork")
        page.get_by_role("button", name="Start the fork").click()
        assert "Forked books" in page.locator("main").inner_text()
        _beside_the_browser(_ended, path, "books-fork")  # the fork runs in the inspector
        page.locator("a.compare").click()
        page.wait_for_url(re.compile(r"/compare\?"))
        result = page.locator("tr.differs[data-key='result']")
        assert "> A" in result.inner_text()
        assert "They differ." in page.locator("main").inner_text()
        assert "clerk" in page.locator(".compare-head").inner_text()
    assert errors == []
