"""In a real browser: answer a waiting run's form, watch its tokens and steps arrive, see it finish.

The run lives in its own process (``tests/ui/live_app.py``); the inspector in
another (``actorflow ui --app``), on asyncio and on trio.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow.errors import RunNotFoundError
from actorflow.runtime import Recorded, watch_run
from actorflow.storage import FileStore
from tests.ui.browser import chromium, needs_browser
from tests.ui.serving import ROOT, serving

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from playwright.sync_api import Page

pytestmark = needs_browser
RUN = "chat-live"


async def _until_waiting(path: str) -> None:
    store = FileStore(path)
    try:
        with anyio.fail_after(60):
            while True:  # its folder is made before its manifest is written
                try:
                    await store.read_run(RUN)
                    break
                except RunNotFoundError:
                    await anyio.sleep(0.02)  # another process: no event to wait on
            async with contextlib.aclosing(watch_run(store, RUN, poll_interval=0.02)) as events:
                async for event in events:
                    if isinstance(event, Recorded):  # the wait's request
                        return
    finally:
        await store.aclose()


@contextlib.contextmanager
def live_run(path: str, loop: str) -> Iterator[subprocess.Popen[bytes]]:
    """``Chat`` running in its own process, waiting for its ChatGo."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.ui.live_app", path, RUN, loop],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while not os.path.exists(os.path.join(path, "runs", RUN)):
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "ended")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
        anyio.run(_until_waiting, path)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def _answer(page: Page, base: str, fill: dict[str, str], check: tuple[str, ...] = ()) -> None:
    page.goto(base + "/waits")
    page.locator(f"tr[data-run='{RUN}'] a.answer").first.click()
    for name, value in fill.items():
        page.fill(f"[name='f.{name}']", value)
    for name in check:
        page.check(f"[name='f.{name}']")
    page.get_by_role("button", name="Send answer").click()
    assert "Sent a" in page.locator("main").inner_text()


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_answer_a_wait_follow_the_run_live_and_see_it_finish(tmp_path: Path, loop: str) -> None:
    path = str(tmp_path / "store")
    app = "tests.ui.live_app:make_runtime"
    errors: list[str] = []
    with (
        live_run(path, loop) as proc,
        serving("--store", path, "--app", app, "--loop", loop) as url,
        chromium() as browser,
    ):
        context = browser.new_context()
        watching = context.new_page()
        watching.on("pageerror", lambda exc: errors.append(str(exc)))
        watching.goto(url)
        base = watching.url.rstrip("/")
        watching.goto(f"{base}/runs/{RUN}")
        assert watching.locator("#live-part").get_attribute("data-live") == "1"
        watching.wait_for_function("document.getElementById('live-state').textContent === 'live'")

        acting = context.new_page()
        # a value that does not fit is refused, naming its field
        acting.goto(base + "/waits")
        acting.locator(f"tr[data-run='{RUN}'] a.answer").first.click()
        acting.fill("[name='f.topic']", "tide")
        acting.fill("[name='f.tokens']", "three")
        acting.get_by_role("button", name="Send answer").click()
        assert "tokens" in acting.locator(".form-error").inner_text()

        _answer(acting, base, {"topic": "tide", "tokens": "3"}, check=("loud",))
        tokens = watching.locator("#tokens")
        tokens.wait_for(state="visible")
        watching.wait_for_function(
            "document.getElementById('tokens').textContent.includes('TIDE-2')"
        )
        assert tokens.inner_text().split() == ["TIDE-0", "TIDE-1", "TIDE-2"]
        watching.locator("#timeline a.bar.kind-now").wait_for()  # a new step, drawn live

        _answer(acting, base, {"verdict": "shipped"})
        watching.wait_for_function(
            "document.getElementById('run-status').textContent === 'completed'"
        )
        assert proc.wait(timeout=60) == 0
        watching.wait_for_load_state()
        watching.locator("details.result").wait_for()
        context.close()
    assert errors == []


def test_a_paused_run_is_answered_and_continued_by_the_inspector(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "tests.ui.live_app", path, "ask-1"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    app = "tests.ui.live_app:make_runtime"
    with serving("--store", path, "--app", app) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        base = page.url.rstrip("/")
        page.goto(base + "/waits")
        page.locator("tr[data-run='ask-1'] a.answer").click()
        page.fill("[name='f.value']", "yes")
        page.get_by_role("button", name="Send answer").click()
        assert "The run is paused" in page.locator("main").inner_text()
        page.get_by_role("button", name="Continue it here").click()
        assert "Continuing the run" in page.locator("main").inner_text()
        page.goto(base + "/runs/ask-1")
        page.wait_for_function(
            "document.getElementById('run-status').textContent === 'completed'", timeout=60_000
        )
        page.locator("details.result summary").click()
        assert "ship it? yes" in page.locator("details.result").inner_text()
