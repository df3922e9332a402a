"""PostgresStore fixtures: a store in a schema of its own on the session's real server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actorflow.storage.postgres import PostgresStore
    from tests.storage.pg_server import PgServer

KEY = bytes(range(32))


@pytest.fixture(params=["plain", "gzip-aes"])
async def pg_store(
    request: pytest.FixtureRequest, pg_server: PgServer
) -> AsyncIterator[PostgresStore]:
    """An open, empty PostgresStore (plain, or compressed and encrypted), closed after."""
    from actorflow.storage import Codec
    from actorflow.storage.postgres import PostgresStore

    codec = (
        Codec()
        if request.param == "plain"
        else Codec(compression="gzip", compress_above=64, keys={"k1": KEY})
    )
    store = PostgresStore(pg_server.dsn(), schema=pg_server.schema(), codec=codec, pool_size=4)
    try:
        yield store
    finally:
        await store.aclose()
