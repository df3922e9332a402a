"""The inspector in a real browser (chromium, through Playwright) over a store of real runs.

The server runs as ``actorflow ui`` in a subprocess (on asyncio, and on trio),
and the tests are plain functions: Playwright's sync API drives the browser
outside any event loop of the tests.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.ui.browser import chromium, needs_browser
from tests.ui.conftest import CRASHED, HOSTILE_MANIFEST
from tests.ui.serving import serving

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Page

pytestmark = needs_browser


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def page(request: pytest.FixtureRequest, store_path: str) -> Iterator[Page]:
    """A browser page that has opened the printed URL (so it holds the token's cookie)."""
    errors: list[str] = []
    with serving("--store", store_path, "--loop", request.param) as url, chromium() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        tab = context.new_page()
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.on("dialog", lambda dialog: errors.append(f"dialog: {dialog.message}"))
        tab.goto(url)
        assert tab.url.endswith("/")  # the token left the address bar
        yield tab
        context.close()
    assert errors == []


def _inert(page: Page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_every_view_opens(page: Page) -> None:
    base = page.url.rstrip("/")
    views = {
        "/": "Runs",
        "/runs/team-trio": "Timeline",
        "/runs/team-trio/decisions": "Decisions",
        "/runs/team-trio/checkpoints": "Checkpoints",
        "/runs/team-trio/checkpoints/latest": "Agents",
        "/runs/team-trio/diff": "Phases finished",
        "/waits": "Waiting",
        "/health": "Store health",
        "/health?check=1": "Checksums",
    }
    for path, heading in views.items():
        reply = page.goto(base + path)
        assert reply is not None
        assert reply.status == 200, path
        assert page.get_by_text(heading).first.is_visible(), path
        _inert(page)
    page.goto(base + "/")
    page.click("a[href='/runs/team-trio']")
    assert page.locator("#timeline .lane[data-lane='researcher-0'] .bar").count() >= 1


def test_clicking_a_step_shows_its_record(page: Page) -> None:
    page.goto(page.url.split("/runs")[0].rstrip("/") + "/runs/team-trio")
    bar = page.locator("#timeline .lane[data-lane='researcher-0'] a.bar.kind-ask").first
    position = bar.get_attribute("data-position")
    bar.click()
    panel = page.locator(f"#record .record[data-position='{position}']")
    panel.wait_for()
    assert "Reply (decoded)" in panel.inner_text()
    assert "found" in panel.inner_text()
    # the message it sent, decoded by its stored type
    assert "Message Research (decoded)" in panel.inner_text()
    assert '"topic"' in panel.locator("pre.message").inner_text()
    assert f"step={position}" in page.url  # the address names the step shown
    assert "on" in (bar.get_attribute("class") or "")


def _opacity(page: Page, selector: str) -> str:
    return str(page.eval_on_selector(selector, "el => getComputedStyle(el).opacity"))


def test_replayed_steps_are_told_apart_from_live_ones(page: Page) -> None:
    base = re.sub(r"(https?://[^/]+).*", r"\1", page.url)
    page.goto(f"{base}/runs/{CRASHED}")
    replayed = page.locator("#timeline a.bar.replayed")
    live = page.locator("#timeline a.bar.live-step")
    assert replayed.count() >= 1
    assert live.count() >= 1
    # seen, not only classed: a replayed bar is drawn faded
    assert _opacity(page, "#timeline a.bar.replayed") != _opacity(page, "#timeline a.bar.live-step")
    legend = page.locator(".legend").inner_text()
    assert "recorded live in attempt 2 (the newest)" in legend
    assert "replayed: recorded by an earlier attempt" in legend
    replayed.first.click()
    panel = page.locator("#record .record .provenance")
    panel.wait_for()
    assert panel.inner_text() == "recorded live in attempt 1; replayed in attempt 2"
    position = live.first.get_attribute("data-position")
    live.first.click()
    page.locator(f"#record .record[data-position='{position}']").wait_for()
    assert page.locator("#record .provenance").inner_text() == "recorded live in attempt 2"


def test_diffing_two_checkpoints(page: Page) -> None:
    page.goto(re.sub(r"(https?://[^/]+).*", r"\1", page.url) + "/runs/team-trio/checkpoints")
    radios_a = page.locator("input[name='a']")
    radios_b = page.locator("input[name='b']")
    radios_a.first.check()
    radios_b.last.check()
    page.get_by_role("button", name="Diff the two chosen").click()
    page.wait_for_url(re.compile(r"/diff\?"))
    assert page.locator(".agent-diff[data-agent='researcher-0']").count() == 1
    assert "accept" in page.locator("main").inner_text()


def test_hostile_strings_are_shown_as_text(page: Page) -> None:
    base = re.sub(r"(https?://[^/]+).*", r"\1", page.url)
    for path in (f"/runs/{HOSTILE_MANIFEST}", "/runs/team-asyncio", "/runs/team-asyncio/decisions"):
        page.goto(base + path)
        _inert(page)
        assert "<script>window.__pwned = 1</script>" in page.locator("main").inner_text()
    page.goto(base + "/?status=paused")
    assert "<script>window.__pwned = 1</script>" in page.locator("#runs").inner_text()
    assert "[bold red]rich" in page.locator("#runs").inner_text()
    _inert(page)
