"""An encrypted run: its phase names and checkpoint reasons never show in the store's names.

On the file store and on a real S3 server: every file and object name of the
run (and of a fork of it) is free of the user's words, while listing with the
key (the store's, and ``actorflow checkpoints``') gives them back, and a fork
from the reasoned checkpoint runs.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import TYPE_CHECKING
from urllib.parse import unquote

import anyio
import pytest

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.runtime.reading import checkpoint_rows
from actorflow.storage import Codec, FileStore, S3Store, SqliteStore
from tests.storage.factories_s3 import open_s3_store

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.storage.s3_servers import S3Server

KEY = bytes(range(32))
PHASE = "Nightingale_~%41/../<b>draft"
REASON = "merger with ACME_Corp ~ 100%/..\n[red]"
WORDS = ("nightingale", "acme")


class Secretive(Orchestrator):
    __actorflow_name__ = "tests.sealed_names.Secretive"
    saved: anyio.Event  # set by the test once the reasoned checkpoint is written

    async def run(self, ctx: RunContext, text: str) -> str:
        async def draft() -> str:
            await ctx.now()  # a step, so the checkpoint is at a position of its own
            ctx.checkpoint(REASON)
            await Secretive.saved.wait()  # a later request would replace a queued one
            return text.upper()

        async def polish(drafted: str) -> str:
            return drafted + "!"

        drafted = await ctx.phase(PHASE, draft)
        return await ctx.phase("polish", polish, drafted)


@pytest.fixture(params=["file", "s3", "sqlite"])
def sealed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[FileStore | S3Store | SqliteStore, Callable[[], list[str]]]:
    """An encrypted store, and what lists every name it holds (paths, keys, text in rows)."""
    codec = Codec(keys={"k1": KEY})
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "store.db", codec=codec), lambda: [
            *_texts(tmp_path / "store.db"),
            *(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")),
        ]
    if request.param == "file":
        return FileStore(tmp_path, codec=codec), lambda: [
            str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
        ]
    server: S3Server = request.getfixturevalue("seaweed_server")
    store = open_s3_store(server, codec, prefix=f"t-{uuid.uuid4().hex[:12]}")

    def keys() -> list[str]:
        pages = server.client().get_paginator("list_objects_v2")
        found = pages.paginate(Bucket=server.bucket, Prefix=store.prefix)
        return [o["Key"] for page in found for o in page.get("Contents", ())]

    return store, keys


def _texts(path: Path) -> list[str]:
    """Every text in every row of an SQLite store (the plain columns: ids, names)."""
    found: list[str] = []
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):
                found += [value for value in row if isinstance(value, str)]
    conn.close()
    return found


def assert_no_words(names: list[str]) -> None:
    assert names
    for name in names:
        for text in (name, unquote(name)):
            assert not any(w in text.lower() for w in WORDS), name


async def test_an_encrypted_run_names_no_phase_or_reason_and_forks_from_its_checkpoint(
    sealed: tuple[FileStore | S3Store | SqliteStore, Callable[[], list[str]]],
) -> None:
    store, names = sealed
    Secretive.saved = anyio.Event()
    async with store, Runtime(store=store) as runtime:
        handle = await runtime.start(Secretive, "memo", run_id="secret")
        async for event in handle.events(emits=False):  # ends with the run
            if event.name == "checkpoint_saved" and event["trigger"] == f"manual:{REASON}":
                Secretive.saved.set()
        assert await handle.result() == "MEMO!"
        infos = await store.list_snapshots("secret")
        reasoned = next(i for i in infos if i.trigger == f"manual:{REASON}")
        assert reasoned.phase is not None
        assert PHASE in reasoned.phase
        assert any(i.phase and PHASE in i.phase and i.trigger == "phase_end" for i in infos)
        # what `actorflow checkpoints` shows, given the key
        rows = await checkpoint_rows(store, "secret")
        [row] = [r for r in rows if r["snapshot_id"] == reasoned.snapshot_id]
        assert (row["phase"], row["trigger"]) == (reasoned.phase, f"manual:{REASON}")
        assert row["checksum"] == "ok"
        assert row["forkable"]
        handle = await runtime.fork("secret", reasoned.snapshot_id, new_run_id="secret-fork")
        assert await handle.result() == "MEMO!"
    assert_no_words(names())
