"""Fork with an edit from the inspector, and two runs compared side by side."""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

import anyio

from actorflow import Runtime
from actorflow.runtime import RunEnded
from actorflow.storage import FileStore
from actorflow.ui import create_app
from tests.runtime.workflow.fork_flow import Ledger
from tests.ui.test_actions import _csrf, session

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.applications import Starlette


@contextlib.asynccontextmanager
async def ledger(tmp_path: Path) -> AsyncIterator[tuple[Runtime, Starlette, str]]:
    """A finished Ledger run, a running runtime to drive forks, an inspector with both."""
    async with Runtime(store=FileStore(str(tmp_path / "store"))) as runtime:
        handle = await runtime.start(Ledger, "a", run_id="books")
        await handle.result()
        await handle.checkpointed()  # its phase ends may still be queued after it returned
        rows = await runtime.store.list_snapshots("books")
        # the first phase's end (its phase label may be the next one's, when they coalesce)
        opened = next(s.snapshot_id for s in rows if s.trigger == "phase_end")
        yield runtime, create_app(runtime.store, runtime=runtime), opened


async def _ended(runtime: Runtime, run_id: str) -> None:
    with anyio.fail_after(60):
        async with contextlib.aclosing(runtime.watch(run_id, poll_interval=0.01)) as events:
            async for event in events:
                if isinstance(event, RunEnded):
                    return


async def test_a_fork_with_an_edited_state_and_its_comparison(tmp_path: Path) -> None:
    async with ledger(tmp_path) as (runtime, app, opened), session(app) as client:
        form = (await client.get(f"/runs/books/fork?checkpoint={opened}")).text
        assert 'name="state.clerk"' in form
        assert "&#34;entries&#34;" in form  # the clerk's state there, as JSON to edit
        data = {
            "csrf": _csrf(form),
            "checkpoint": opened,
            "edit.clerk": "1",
            "state.clerk": '{"entries": ["x"], "prefix": "<b>", "pages": 9}',
            "new_run_id": "books-edited",
        }
        forked = await client.post("/runs/books/fork", data=data)
        assert forked.status_code == 200
        assert "Forked books" in forked.text
        assert "Edited: clerk" in forked.text
        await _ended(runtime, "books-edited")
        assert await runtime.result("books-edited") == ["x", "<b>A"]
        compared = (await client.get("/compare?a=books&b=books-edited")).text
        assert "They differ." in compared
        assert 'class="differs" data-key="result"' in compared
        assert "&lt;b&gt;A" in compared  # the fork's reply, escaped
        assert "clerk" in compared  # what the fork edited
        everything = (await client.get("/compare?a=books&b=books-edited&all=1")).text
        assert 'class="same"' in everything
        run = (await client.get("/runs/books-edited")).text
        assert "edited: clerk" in run
        assert 'href="/compare?a=books&amp;b=books-edited"' in run


async def test_an_edit_that_does_not_fit_is_refused_naming_the_field(tmp_path: Path) -> None:
    async with ledger(tmp_path) as (runtime, app, opened), session(app) as client:
        form = (await client.get(f"/runs/books/fork?checkpoint={opened}")).text
        data = {"csrf": _csrf(form), "checkpoint": opened, "edit.clerk": "1"}
        misfit = await client.post(
            "/runs/books/fork", data={**data, "state.clerk": '{"entries": "x"}'}
        )
        assert "Not forked" in misfit.text
        assert "entries" in misfit.text
        assert "{&#34;entries&#34;: &#34;x&#34;}" in misfit.text  # the edit is kept to fix
        broken = await client.post("/runs/books/fork", data={**data, "state.clerk": "{"})
        assert "not valid JSON" in broken.text
        assert [m.run_id for m in await runtime.store.list_runs()] == ["books"]


async def test_forking_needs_a_running_app_runtime(tmp_path: Path) -> None:
    async with ledger(tmp_path) as (runtime, _, opened):
        app = create_app(runtime.store)
        async with session(app) as client:
            form = (await client.get(f"/runs/books/fork?checkpoint={opened}")).text
            data = {"csrf": _csrf(form), "checkpoint": opened}
            refused = await client.post("/runs/books/fork", data=data)
            assert refused.status_code == 500
            assert "--app" in refused.text


async def test_comparing_a_run_that_is_not_there_says_so(tmp_path: Path) -> None:
    async with ledger(tmp_path) as (_, app, _opened), session(app) as client:
        missing = await client.get("/compare?a=books&b=nope")
        assert missing.status_code == 404
        assert "nope" in missing.text
        bad = await client.get("/compare?a=books&b=%3Cscript%3E")
        assert bad.status_code == 400
        assert re.search(r"<script>", bad.text) is None
