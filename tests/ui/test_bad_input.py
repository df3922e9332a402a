"""Bad input and hostile text: a page that says what is wrong, never a trace, nothing executed."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from html.parser import HTMLParser
from typing import TYPE_CHECKING

import httpx
import pytest

from actorflow.storage import FileStore, MemoryStore, RunManifest
from actorflow.ui import create_app
from tests.ui.conftest import HOSTILE_MANIFEST
from tests.ui.flows import ATTRIBUTE, SCRIPT

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

BASE = "http://127.0.0.1:8765"


class _Tags(HTMLParser):
    """Every tag and attribute name of a page, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.handlers: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append(dict(attrs))
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v]


def assert_inert(html: str) -> _Tags:
    """Nothing on the page runs but the inspector's own script; no event handler attribute."""
    tags = _Tags()
    tags.feed(html)
    assert tags.scripts == [{"src": "/static/ui.js", "defer": None}]
    assert tags.handlers == []
    assert SCRIPT not in html
    assert ATTRIBUTE not in html
    assert "Traceback" not in html
    return tags


@contextlib.asynccontextmanager
async def _session(app: object) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` holding its token's cookie."""
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        token = app.state.token  # type: ignore[attr-defined]
        if token:
            await client.get(f"/?token={token}")
        yield client


@pytest.mark.parametrize(
    ("path", "code", "says"),
    [
        ("/runs/%3Cscript%3Ealert(1)%3C", 400, "not allowed"),
        ("/runs/a..b", 400, "Not a valid name"),
        ("/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E", 404, "no page at"),
        ("/runs/no-such-run", 404, "no-such-run"),
        ("/runs/team-trio/checkpoints/nope", 404, "nope"),
        ("/runs/team-trio/checkpoints/latest?agent=%3Cscript%3E", 404, "has no agent"),
        ("/runs/team-trio/diff?a=nope&b=latest", 404, "nope"),
        ("/runs/team-trio/records/99999", 500, "no log record at position 99999"),
        ("/no/such/page", 404, "no page at"),
    ],
)
async def test_bad_input_gives_a_page_saying_what_is_wrong(
    store_path: str, path: str, code: int, says: str
) -> None:
    store = FileStore(store_path)
    async with _session(create_app(store)) as client:
        reply = await client.get(path)
        assert reply.status_code == code
        assert reply.headers["content-type"].startswith("text/html")
        assert says in reply.text
        assert_inert(reply.text)
    await store.aclose()


async def test_hostile_text_a_run_stored_is_shown_and_never_runs(store_path: str) -> None:
    store = FileStore(store_path)
    async with _session(create_app(store)) as client:
        for path in ("/", f"/runs/{HOSTILE_MANIFEST}", "/?status=paused"):
            html = (await client.get(path)).text
            assert_inert(html)
            assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
            assert "[bold red]rich[/]" in html  # Rich markup is text here, as it was stored
        for path in ("/runs/team-asyncio", "/runs/team-asyncio/decisions"):
            html = (await client.get(path)).text
            assert_inert(html)
            assert "&lt;script&gt;" in html
    await store.aclose()


async def test_a_megabyte_string_is_cut_with_the_rest_counted(store_path: str) -> None:
    store = FileStore(store_path)
    async with _session(create_app(store)) as client:
        html = (await client.get("/runs/team-big")).text
        assert len(html) < 300_000
        assert "more characters" in html
        checkpoint = (await client.get("/runs/team-big/checkpoints/latest")).text
        assert len(checkpoint) < 300_000
        assert "996000 more characters" in checkpoint
    await store.aclose()


async def test_a_name_that_is_not_utf8_in_a_damaged_store_is_shown_escaped(
    store_path: str,
) -> None:
    store = FileStore(store_path)
    async with _session(create_app(store)) as client:
        reply = await client.get("/")
        assert reply.status_code == 200
        assert "cannot be read" in reply.text
    await store.aclose()


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


async def test_damaged_checkpoints_and_logs_are_named_not_raised(
    store_path: str, tmp_path: Path
) -> None:
    copy = tmp_path / "damaged"
    shutil.copytree(store_path, copy, symlinks=True)
    snapshots = sorted((copy / "runs" / "team-trio" / "snapshots").iterdir())
    _damage(snapshots[-1])
    for segment in (copy / "runs" / "team-asyncio" / "log").iterdir():
        _damage(segment)
    store = FileStore(str(copy))
    async with _session(create_app(store)) as client:
        listing = await client.get("/runs/team-trio/checkpoints")
        assert listing.status_code == 200
        assert "corrupt" in listing.text
        damaged = re.findall(r'href="/runs/team-trio/checkpoints/([^"?]+)"', listing.text)[-1]
        page = await client.get(f"/runs/team-trio/checkpoints/{damaged}")
        assert page.status_code == 500
        assert "Damaged data" in page.text
        assert_inert(page.text)
        run = await client.get("/runs/team-asyncio")
        assert run.status_code in (200, 500)
        assert_inert(run.text)
        assert "corrupt" in run.text.lower() or "damaged" in run.text.lower()
    await store.aclose()


class _Failing(MemoryStore):
    async def read_run(self, run_id: str) -> RunManifest:
        raise RuntimeError("a defect <script>window.__pwned = 1</script>")


async def test_a_defect_is_a_page_naming_it_without_its_traceback() -> None:
    async with _session(create_app(_Failing())) as client:
        reply = await client.get("/runs/any-run")
        assert reply.status_code == 500
        assert "RuntimeError: a defect" in reply.text
        assert_inert(reply.text)


def _fingerprint(root: str) -> dict[str, str]:
    found = {}
    for folder, dirs, files in os.walk(os.fsencode(root)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            key = os.fsdecode(os.path.relpath(path, os.fsencode(root)))
            if os.path.isdir(path):
                found[key] = "dir"
            else:
                with open(path, "rb") as f:
                    found[key] = hashlib.sha256(f.read()).hexdigest()
    return found


async def test_browsing_every_page_leaves_the_store_byte_for_byte_as_it_was(
    store_path: str,
) -> None:
    before = _fingerprint(store_path)
    store = FileStore(store_path)
    seen: set[str] = set()
    async with _session(create_app(store)) as client:
        todo = ["/"]
        while todo and len(seen) < 400:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            reply = await client.get(path)
            assert reply.status_code in (200, 303), path
            tags = assert_inert(reply.text)
            for link in tags.links:
                target = link.split("#", 1)[0]
                # one record per run is enough: a step link differs only by its position
                if target.startswith("/") and "step=" not in target and target not in seen:
                    todo.append(target)
    await store.aclose()
    for kind in ("/checkpoints/", "/records/", "/diff?", "/decisions", "/waits", "check=1"):
        assert any(kind in p for p in seen), kind
    assert _fingerprint(store_path) == before
