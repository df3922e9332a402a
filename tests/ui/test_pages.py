"""Every page of the inspector, served in-process over a store made by real runs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx

from actorflow.storage import FileStore, RunManifest, RunStatus
from actorflow.ui import create_app
from tests.ui.conftest import HOSTILE_MANIFEST, RUNS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.applications import Starlette

BASE = "http://127.0.0.1:8765"


async def _client(app: Starlette, *, login: bool = True) -> httpx.AsyncClient:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
    if login and app.state.token:
        reply = await client.get(f"/?token={app.state.token}")
        assert reply.status_code == 303
        assert reply.headers["location"] == "/"
    return client


class Browse:
    """An inspector over the store and a client that holds its cookie."""

    def __init__(self, path: str, **options: object) -> None:
        self.store = FileStore(path)
        self.app = create_app(self.store, **options)  # type: ignore[arg-type]
        self.client: httpx.AsyncClient

    async def __aenter__(self) -> Browse:
        self.client = await _client(self.app)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        await self.store.aclose()

    async def page(self, path: str, code: int = 200) -> str:
        reply = await self.client.get(path)
        assert reply.status_code == code, (path, reply.status_code, reply.text[:2000])
        assert "Traceback" not in reply.text
        return reply.text


async def browse(path: str) -> AsyncIterator[Browse]:
    async with Browse(path) as b:
        yield b


async def test_the_runs_page_lists_every_run_with_counts_per_status(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/")
        for run_id in RUNS:
            assert f'href="/runs/{run_id}"' in html
        assert "completed 4" in html
        assert "paused 1" in html


async def test_the_runs_page_filters_by_status_text_and_workflow(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/?status=paused")
        assert HOSTILE_MANIFEST in html
        assert "team-trio" not in html
        html = await b.page("/?q=TRIO")
        assert "team-trio" in html
        assert "team-asyncio" not in html
        html = await b.page("/?workflow=Team&age=1d")
        assert "team-trio" in html
        assert HOSTILE_MANIFEST not in html


async def test_a_run_page_has_a_lane_per_agent_and_the_orchestrator(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio")
        for lane in ("orchestrator", "researcher-0", "researcher-1", "critic"):
            assert f'data-lane="{lane}"' in html
        assert 'class="bar kind-ask' in html
        assert "failed" in html  # the critic's step that raised
        assert re.search(r'class="band"[^>]*>gather<', html)
        assert "marker-decision" in html
        assert "marker-checkpoint" in html


async def test_clicking_a_step_shows_its_record_decoded(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio")
        position = re.search(r'class="bar kind-ask[^"]*" data-position="(\d+)"', html)
        assert position is not None
        panel = await b.page(f"/runs/team-trio/records/{position[1]}?partial=1")
        assert "Reply (decoded)" in panel
        assert "found alpha" in panel
        assert "Message <code>Research</code> (decoded)" in panel
        assert "&#34;topic&#34;: &#34;alpha&#34;" in panel or '"topic": "alpha"' in panel
        assert "<html" not in panel
        whole = await b.page(f"/runs/team-trio?step={position[1]}")
        assert "found alpha" in whole
        assert "arguments hash" in whole
        assert "idempotency key</dt><dd><code>team-trio/gather.0/" in whole
        assert "researcher-0's state after it (decoded)" in whole


async def test_decisions_show_rationale_confidence_alternatives_and_their_step(
    store_path: str,
) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio/decisions")
        assert "because found alpha" in html
        assert "0.75" in html
        assert "revise" in html
        assert "in phase review" in html
        assert "review.0/" in html


async def test_checkpoints_list_and_an_agent_state_at_one(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio/checkpoints")
        ids = re.findall(r'href="/runs/team-trio/checkpoints/([^"?]+)"', html)
        assert len(ids) >= 2
        assert "phase_end" in html
        assert "forkable" in html
        state = await b.page(f"/runs/team-trio/checkpoints/{ids[-1]}?agent=researcher-0")
        assert "&#34;seen&#34;" in state
        assert "alpha" in state
        assert 'data-agent="researcher-1"' not in state


async def test_a_diff_between_two_checkpoints_names_changed_fields(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio/checkpoints")
        ids = re.findall(r'href="/runs/team-trio/checkpoints/([^"?]+)"', html)
        diff = await b.page(f"/runs/team-trio/diff?a={ids[0]}&b={ids[-1]}")
        assert "researcher-0" in diff
        assert "Decisions added" in diff
        assert "accept" in diff


async def test_metrics_are_charts_per_agent_and_phase_with_checkpoint_sizes(
    store_path: str,
) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio/metrics")
        assert html.count("<svg") == 6
        for title in ("Steps per agent", "Time in steps per phase", "Checkpoint size over the run"):
            assert title in html
        assert "<title>researcher-0: 2</title>" in html
        assert "<title>steps: " in html  # the run's own counters


async def test_the_runs_rows_alone_for_the_page_to_refresh_them(store_path: str) -> None:
    async with Browse(store_path) as b:
        rows = await b.page("/?partial=rows&status=completed")
        assert '<tr data-run="team-trio">' in rows
        assert "<html" not in rows
        assert HOSTILE_MANIFEST not in rows


async def test_health_names_unreadable_entries_orphans_and_checks_checksums(
    store_path: str, tmp_path: Path
) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/health")
        assert "not a run" in html  # the folder that is no run id
        assert "bad-\\udcff\\udcfe-&lt;script&gt;" in html  # its undecodable name, escaped
        checked = await b.page("/health?check=1")
        assert "problem(s)" in checked
    store = FileStore(str(tmp_path / "store"))
    await store.create_run(
        RunManifest(
            run_id="orphan",
            workflow="W",
            input=b"\xa0",
            input_hash="h",
            status=RunStatus.INTERRUPTED,
            owner="gone-host:1:x",
        )
    )
    await store.aclose()
    async with Browse(str(tmp_path / "store")) as b:
        html = await b.page("/health")
        assert re.search(r"Orphaned runs.*href=\"/runs/orphan\"", html, flags=re.S)


async def test_a_retried_step_lists_its_failed_attempts(store_path: str) -> None:
    async with Browse(store_path) as b:
        html = await b.page("/runs/team-trio")
        critic = re.search(
            r'data-lane="critic".*?class="bar kind-ask[^"]*retried[^"]*" data-position="(\d+)"',
            html,
            re.S,
        )
        assert critic is not None  # the critic's step failed after its retries: marked
        panel = await b.page(f"/runs/team-trio/records/{critic[1]}?partial=1")
        assert "Failed attempts (retried)" in panel
        assert "ValueError" in panel
