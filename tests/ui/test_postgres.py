"""The inspector on a PostgresStore (real server, a schema of each test's own).

Its pages, answering, updating and cancelling a run that another store object
drives (as another process would: the inspector's messages go through the
run's inbox in the database), fork with an edit and compare; and in a real
browser, ``actorflow ui --store postgresql://…?schema=…`` started as the CLI
does, over a run live in a process of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import Runtime
from actorflow.errors import RunNotFoundError
from actorflow.runtime import Recorded, StepCompleted, watch_run
from actorflow.storage import RunStatus, open_store
from actorflow.ui import create_app
from tests.runtime.workflow.fork_flow import Ledger
from tests.storage.pg_server import pg_url
from tests.ui.browser import chromium, needs_browser
from tests.ui.live_app import Chat
from tests.ui.serving import ROOT, first_line, serving, stop, ui_process
from tests.ui.test_actions import _csrf, _until, session
from tests.ui.test_fork import _ended

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from actorflow.storage import Store
    from tests.storage.pg_server import PgServer

pytestmark = pytest.mark.postgres


@pytest.fixture
def location(pg_server: PgServer) -> str:
    """The ``--store`` URL of an empty schema of the test's own."""
    return pg_url(pg_server, pg_server.schema())


@contextlib.asynccontextmanager
async def opened(location: str) -> AsyncIterator[Store]:
    """A store object on ``location`` (another process's, in effect), closed after."""
    store = open_store(location)
    try:
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def test_pages_answer_update_and_cancel_a_run_another_store_drives(location: str) -> None:
    async with (
        opened(location) as driving,
        opened(location) as viewing,
        Runtime(store=driving) as runtime,
    ):
        await runtime.run(Ledger, "a", run_id="books")
        await runtime.start(Chat, "chat", run_id="chat")
        await _until(runtime, "chat", lambda e: isinstance(e, Recorded))  # the wait's request
        async with session(create_app(viewing)) as client:
            runs = (await client.get("/")).text
            assert re.search(r'<tr[^>]*data-run="books"', runs)
            assert re.search(r'<tr[^>]*data-run="chat"', runs)
            book = (await client.get("/runs/books")).text
            assert "tests.fork_flow.Ledger" in book
            assert "Timeline" in book
            # the first phase's end (its ids count the run's snapshots)
            assert re.search(r"\b\d{4}-p3\b", (await client.get("/runs/books/checkpoints")).text)

            waits = (await client.get("/waits")).text
            link = re.search(r'href="(/runs/chat/answer\?step=[^"]+)"', waits)
            assert link is not None
            form = (await client.get(link[1].replace("&amp;", "&"))).text
            step = re.search(r'name="step" value="([^"]+)"', form)
            assert step is not None
            answer = {"csrf": _csrf(form), "step": step[1], "f.topic": "tide", "f.tokens": "2"}
            sent = await client.post("/runs/chat/answer", data=answer)
            assert "Sent a" in sent.text
            await _until(
                runtime, "chat", lambda e: isinstance(e, StepCompleted) and e.record.kind == "now"
            )

            page = (await client.get("/runs/chat")).text
            note = {"csrf": _csrf(page), "type": "ChatNote", "json": '{"text": "hi"}'}
            replied = await client.post("/runs/chat/update", data=note)
            assert "noted: hi" in replied.text

            cancel = {"csrf": _csrf(page), "reason": "wrong topic"}
            assert (await client.post("/runs/chat/cancel", data=cancel)).status_code == 200
            await _ended(runtime, "chat")
            manifest = await viewing.read_run("chat")
            assert manifest.status is RunStatus.CANCELLED
            assert manifest.error is not None
            assert "wrong topic" in manifest.error.message
            assert "cancelled" in (await client.get("/runs/chat")).text


async def test_a_fork_with_an_edited_state_and_its_comparison(location: str) -> None:
    async with opened(location) as store, Runtime(store=store) as runtime:
        handle = await runtime.start(Ledger, "a", run_id="books")
        await handle.result()
        await handle.checkpointed()
        rows = await store.list_snapshots("books")
        first_end = next(s.snapshot_id for s in rows if s.trigger == "phase_end")
        async with session(create_app(store, runtime=runtime)) as client:
            form = (await client.get(f"/runs/books/fork?checkpoint={first_end}")).text
            data = {
                "csrf": _csrf(form),
                "checkpoint": first_end,
                "edit.clerk": "1",
                "state.clerk": '{"entries": ["x"], "prefix": "<b>", "pages": 9}',
                "new_run_id": "books-edited",
            }
            forked = await client.post("/runs/books/fork", data=data)
            assert "Forked books" in forked.text
            await _ended(runtime, "books-edited")
            assert await runtime.result("books-edited") == ["x", "<b>A"]
            compared = (await client.get("/compare?a=books&b=books-edited")).text
            assert "They differ." in compared
            assert 'class="differs" data-key="result"' in compared
            assert "edited: clerk" in (await client.get("/runs/books-edited")).text


@pytest.mark.parametrize("app", [[], ["--app", "tests.ui.live_app:make_runtime"]], ids=str)
def test_a_schema_holding_no_store_is_named_and_left_uncreated(
    pg_server: PgServer, app: list[str]
) -> None:
    schema = pg_server.schema()
    proc = ui_process("--port", "0", *app, "--store", pg_url(pg_server, schema))
    try:
        with pytest.raises(RuntimeError, match=f"no actorflow store at .*schema={schema}"):
            first_line(proc)
        assert proc.returncode == 1
    finally:
        stop(proc)
    assert pg_server.sql(f"SELECT 1 FROM pg_namespace WHERE nspname = '{schema}'") == []


# --- in a real browser -----------------------------------------------------------------

RUN = "chat-live"


async def _until_waiting(location: str) -> None:
    async with opened(location) as store:
        with anyio.fail_after(60):
            while True:
                try:
                    await store.read_run(RUN)
                    break
                except RunNotFoundError:
                    await anyio.sleep(0.02)  # another process writes it: no event to wait on
            async with contextlib.aclosing(watch_run(store, RUN, poll_interval=0.02)) as events:
                async for event in events:
                    if isinstance(event, Recorded):  # the wait's request
                        return


@contextlib.contextmanager
def live_run(location: str) -> Iterator[subprocess.Popen[bytes]]:
    """``Chat`` running in its own process on ``location``, waiting for its ChatGo."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.ui.live_app", location, RUN],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        anyio.run(_until_waiting, location)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


@needs_browser
def test_the_inspector_started_on_a_postgres_url_answers_follows_and_cancels(
    location: str,
) -> None:
    errors: list[str] = []
    app = "tests.ui.live_app:make_runtime"
    with (
        live_run(location) as proc,
        serving("--store", location, "--app", app) as url,
        chromium() as browser,
    ):
        page = browser.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        base = page.url.rstrip("/")
        assert page.locator(f"tr[data-run='{RUN}']").count() == 1
        page.goto(f"{base}/runs/{RUN}")
        page.wait_for_function("document.getElementById('live-state').textContent === 'live'")

        acting = browser.new_page()
        acting.goto(url)
        acting.goto(base + "/waits")
        acting.locator(f"tr[data-run='{RUN}'] a.answer").first.click()
        acting.fill("[name='f.topic']", "tide")
        acting.fill("[name='f.tokens']", "3")
        acting.get_by_role("button", name="Send answer").click()
        assert "Sent a" in acting.locator("main").inner_text()
        page.wait_for_function("document.getElementById('tokens').textContent.includes('tide-2')")

        acting.goto(f"{base}/runs/{RUN}")
        acting.locator("section.actions summary").click()
        acting.fill("[name='reason']", "enough")
        acting.get_by_role("button", name="Cancel run").click()
        page.wait_for_function(
            "document.getElementById('run-status').textContent === 'cancelled'", timeout=60_000
        )
        assert proc.wait(timeout=60) != 0  # its run ended cancelled: run() raised that
        assert proc.stderr is not None
        assert "cancelled: enough" in proc.stderr.read().decode()
    assert errors == []
