"""An encrypted store without its key: runs listed as sealed, with how to give the key."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
from structlog.testing import capture_logs

from actorflow.storage import Codec, FileStore
from actorflow.ui import create_app
from tests.cli.stored import populate

if TYPE_CHECKING:
    from pathlib import Path

KEY = bytes(range(32))


async def test_sealed_runs_are_listed_and_their_pages_say_how_to_give_the_key(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "store")
    await populate(path, Codec(keys={"k1": KEY}))
    store = FileStore(path, codec=Codec(keys={}))
    app = create_app(store, read_only=True)
    transport = httpx.ASGITransport(app=app)
    with capture_logs():
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            runs = await c.get("/")
            assert runs.status_code == 200
            assert "encrypted 2" in runs.text
            assert "encrypted with key k1, not given" in runs.text
            assert "--key-file" in runs.text
            run = await c.get("/runs/run-a")
            assert run.status_code == 403
            assert "Encrypted" in run.text
            assert "--key-file" in run.text
    keyed = FileStore(path, codec=Codec(keys={"k1": KEY}))
    app = create_app(keyed, read_only=True)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as c:
        assert "run-a" in (await c.get("/runs/run-a")).text
    await store.aclose()
    await keyed.aclose()
