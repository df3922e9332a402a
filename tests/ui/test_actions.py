"""Answering a wait from a form built from its type, updates, cancel: validated, gated, sent."""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

import anyio
import httpx

from actorflow import Runtime
from actorflow.runtime import Recorded, RunEnded, StepCompleted
from actorflow.storage import MemoryStore, RunStatus
from actorflow.ui import create_app
from tests.ui.live_app import Chat

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from starlette.applications import Starlette

BASE = "http://127.0.0.1:8765"


@contextlib.asynccontextmanager
async def session(app: Starlette, *, login: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        if login and app.state.token:
            await client.get(f"/?token={app.state.token}")
        yield client


@contextlib.asynccontextmanager
async def live_chat(run_id: str = "chat") -> AsyncIterator[tuple[Runtime, Starlette]]:
    """A Chat run live in this process, waiting for its ChatGo; an inspector over its store."""
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.start(Chat, "chat", run_id=run_id)
        await _until(runtime, run_id, lambda e: isinstance(e, Recorded))  # the wait's request
        yield runtime, create_app(store)


async def _until(runtime: Runtime, run_id: str, seen: Callable[[object], bool]) -> None:
    """Follow the run until an event ``seen`` accepts (bounded)."""
    with anyio.fail_after(30):
        async with contextlib.aclosing(runtime.watch(run_id, poll_interval=0.01)) as events:
            async for event in events:
                if seen(event):
                    return


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found[1]


async def test_a_wait_is_answered_from_a_form_built_from_its_type() -> None:
    async with live_chat() as (runtime, app), session(app) as client:
        waits = (await client.get("/waits")).text
        link = re.search(r'href="(/runs/chat/answer\?step=[^"]+)"', waits)
        assert link is not None
        form = (await client.get(link[1].replace("&amp;", "&"))).text
        assert 'name="f.topic"' in form
        assert 'name="f.tokens"' in form
        assert 'type="checkbox" name="f.loud"' in form
        step = re.search(r'name="step" value="([^"]+)"', form)
        assert step is not None
        answer = {"csrf": _csrf(form), "step": step[1], "f.topic": "tides", "f.tokens": "2"}
        sent = await client.post("/runs/chat/answer", data=answer)
        assert sent.status_code == 200
        assert "Sent a" in sent.text
        await _until(
            runtime, "chat", lambda e: isinstance(e, StepCompleted) and e.record.kind == "now"
        )
        assert (await runtime.query("chat")).waits[0].type == "ChatFinish"


async def test_an_answer_that_does_not_fit_its_type_is_refused_naming_the_field() -> None:
    async with live_chat() as (runtime, app), session(app) as client:
        query = await runtime.query("chat")
        form = (await client.get(f"/runs/chat/answer?step={query.waits[0].step_id}")).text
        answer = {"csrf": _csrf(form), "step": query.waits[0].step_id, "f.topic": "t"}
        refused = await client.post("/runs/chat/answer", data={**answer, "f.tokens": "many"})
        assert "Not sent" in refused.text
        assert "tokens" in refused.text
        missing = await client.post("/runs/chat/answer", data=answer)
        assert "Not sent" in missing.text
        assert "tokens" in missing.text
        assert not (await runtime.query("chat")).inbox  # nothing was sent


async def test_an_action_needs_the_csrf_token_and_the_cookie() -> None:
    async with live_chat() as (runtime, app):
        async with session(app) as client:
            page = (await client.get("/runs/chat")).text
            assert (await client.post("/runs/chat/cancel", data={})).status_code == 403
            wrong = await client.post("/runs/chat/cancel", data={"csrf": "x" * 64})
            assert wrong.status_code == 403
            foreign = await client.post(
                "/runs/chat/cancel",
                data={"csrf": _csrf(page)},
                headers={"origin": "http://evil.example"},
            )
            assert foreign.status_code == 403
        async with session(app, login=False) as stranger:
            refused = await stranger.post("/runs/chat/cancel", data={"csrf": _csrf(page)})
            assert refused.status_code == 403
        assert (await runtime.store.read_run("chat")).status is RunStatus.RUNNING


async def test_read_only_has_no_actions() -> None:
    async with live_chat() as (runtime, _):
        app = create_app(runtime.store, read_only=True)
        async with session(app) as client:
            page = (await client.get("/runs/chat")).text
            assert 'method="post"' not in page
            assert "answer</a>" not in page
            refused = await client.post("/runs/chat/cancel", data={"csrf": ""})
            assert refused.status_code == 403
            assert "read-only" in refused.text


async def test_an_update_gets_the_runs_reply() -> None:
    async with live_chat() as (_, app), session(app) as client:
        page = (await client.get("/runs/chat")).text
        data = {"csrf": _csrf(page), "type": "ChatNote", "json": '{"text": "hi <b>"}'}
        reply = await client.post("/runs/chat/update", data=data)
        assert reply.status_code == 200
        assert "the run replied" in reply.text
        assert "noted: hi &lt;b&gt;" in reply.text
        bad = await client.post("/runs/chat/update", data={**data, "json": '{"txt": 1}'})
        assert "JSON for a ChatNote" in bad.text


async def test_cancel_with_a_reason() -> None:
    async with live_chat() as (runtime, app), session(app) as client:
        page = (await client.get("/runs/chat")).text
        done = await client.post(
            "/runs/chat/cancel", data={"csrf": _csrf(page), "reason": "wrong topic"}
        )
        assert done.status_code == 200
        await _until(runtime, "chat", lambda e: isinstance(e, RunEnded))
        manifest = await runtime.store.read_run("chat")
        assert manifest.status is RunStatus.CANCELLED
        assert manifest.error is not None
        assert "wrong topic" in manifest.error.message


async def test_continuing_a_run_here_needs_the_apps_running_runtime() -> None:
    async with live_chat() as (_, app), session(app) as client:
        page = (await client.get("/runs/chat")).text
        refused = await client.post("/runs/chat/continue", data={"csrf": _csrf(page)})
        assert refused.status_code == 500
        assert "--app" in refused.text
        assert "actorflow recover chat" in refused.text
