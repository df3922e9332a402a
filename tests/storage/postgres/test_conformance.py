"""PostgresStore through the shipped conformance suite, on a real server, both loops."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.testing.conformance import StoreConformance

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.storage import Store
    from actorflow.storage.postgres import PostgresStore

pytestmark = pytest.mark.postgres


class TestPostgresStore(StoreConformance):
    """Every capability of the suite, in a schema of its own per test."""

    @pytest.fixture
    def store(self, pg_store: PostgresStore) -> Store:
        """The conftest's store: plain, or gzip and AES."""
        return pg_store

    @pytest.fixture
    def reopen(self) -> Callable[[Store], Store] | None:
        """A second store object on the same schema."""
        return _reopen

    @pytest.fixture
    def damage_inbox_entry(self) -> Callable[[Store, str, int], Awaitable[None]] | None:
        """A byte flipped in the entry's row."""
        return _damage_inbox_entry


def _reopen(store: Store) -> Store:
    from actorflow.storage.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    return PostgresStore(store.dsn, schema=store.schema, codec=store.codec, pool_size=2)


async def _damage_inbox_entry(store: Store, run_id: str, seq: int) -> None:
    import anyio.to_thread
    import psycopg

    from actorflow.storage.postgres import PostgresStore

    assert isinstance(store, PostgresStore)

    def flip() -> None:
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            conn.execute(
                f"UPDATE {store.schema}.af_inbox "
                "SET data = substring(data from 1 for length(data) - 1) "
                "|| set_byte('\\x00'::bytea, 0, get_byte(data, length(data) - 1) # 255) "
                "WHERE run_id = %s AND seq = %s",
                (run_id, seq),
            )

    await anyio.to_thread.run_sync(flip)
