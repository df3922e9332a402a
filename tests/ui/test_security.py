"""Who may see and who may act: Host header, launch token, cookie, read-only mode."""

from __future__ import annotations

import httpx

from actorflow.storage import FileStore
from actorflow.ui import create_app

BASE = "http://127.0.0.1:8765"


def _client(app: object, base: str = BASE) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)  # type: ignore[arg-type]


async def test_pages_need_the_token_which_the_printed_url_sets_as_a_cookie(
    store_path: str,
) -> None:
    store = FileStore(store_path)
    app = create_app(store, token="t" * 32)
    async with _client(app) as client:
        refused = await client.get("/")
        assert refused.status_code == 403
        assert "launch token" in refused.text
        wrong = await client.get("/?token=" + "u" * 32)
        assert wrong.status_code == 403
        given = await client.get("/runs/team-trio?token=" + "t" * 32)
        assert given.status_code == 303
        assert given.headers["location"] == "/runs/team-trio"  # the token leaves the URL
        cookie = given.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        assert (await client.get("/runs/team-trio")).status_code == 200
    await store.aclose()


async def test_a_fresh_token_when_none_is_given(store_path: str) -> None:
    first = create_app(store_path)
    second = create_app(store_path)
    assert first.state.token
    assert second.state.token
    assert first.state.token != second.state.token
    assert len(first.state.token) >= 32


async def test_read_only_pages_need_no_token_and_offer_no_actions(store_path: str) -> None:
    store = FileStore(store_path)
    app = create_app(store, read_only=True)
    assert app.state.token is None
    async with _client(app) as client:
        page = await client.get("/")
        assert page.status_code == 200
        assert "read-only" in page.text
        assert '<form method="post"' not in page.text
    await store.aclose()


async def test_a_foreign_host_header_is_refused(store_path: str) -> None:
    store = FileStore(store_path)
    app = create_app(store, read_only=True)
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example"):
        async with _client(app, f"http://{host}") as client:
            reply = await client.get("/")
            assert reply.status_code == 400, host
            assert "not one this inspector serves" in reply.text
    for host in ("localhost:8765", "127.0.0.1", "[::1]:8765"):
        async with _client(app, f"http://{host}") as client:
            assert (await client.get("/")).status_code == 200, host
    allowed = create_app(store, read_only=True, allowed_hosts=["inspector.lan"])
    async with _client(allowed, "http://inspector.lan:8765") as client:
        assert (await client.get("/")).status_code == 200
    await store.aclose()
