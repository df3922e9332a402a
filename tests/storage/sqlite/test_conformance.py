"""SqliteStore through the shipped conformance suite, with each codec, on asyncio and trio."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from actorflow.storage import Codec, SqliteStore
from actorflow.testing.conformance import StoreConformance

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from actorflow.storage import Store

KEY = bytes(range(32))

CODECS: dict[str, Callable[[], Codec]] = {
    "default": Codec,
    "gzip": lambda: Codec(compression="gzip", compress_above=64),
    "zstd-aes": lambda: Codec(compression="zstd", compress_above=64, keys={"k1": KEY}),
    "plain": lambda: Codec(compression=None),
}


class TestSqliteStore(StoreConformance):
    """Every capability the suite tests, on one SQLite file per test."""

    @pytest.fixture(params=list(CODECS))
    async def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
        """A new store in ``tmp_path``, sealed with each codec."""
        store = SqliteStore(tmp_path / "store.db", codec=CODECS[request.param]())
        try:
            yield store
        finally:
            await store.aclose()

    @pytest.fixture
    def reopen(self) -> Callable[[Store], Store] | None:
        """The same file, opened again by a new store object."""
        return _reopen

    @pytest.fixture
    def damage_inbox_entry(self) -> Callable[[Store, str, int], Awaitable[None]] | None:
        """A byte flipped in the entry's row."""
        return _damage_inbox_entry


def _reopen(store: Store) -> Store:
    assert isinstance(store, SqliteStore)
    return SqliteStore(store.path, codec=store.codec)


async def _damage_inbox_entry(store: Store, run_id: str, seq: int) -> None:
    assert isinstance(store, SqliteStore)
    flip_byte(store.path, "inbox", "entry", "run_id = ? AND seq = ?", (run_id, seq))


def flip_byte(path: str, table: str, column: str, where: str, args: tuple[object, ...]) -> None:
    """Flip the last byte of one row's blob column, as a bad disk sector would."""
    with sqlite3.connect(path) as conn:
        (data,) = conn.execute(f"SELECT {column} FROM {table} WHERE {where}", args).fetchone()
        damaged = data[:-1] + bytes([data[-1] ^ 0xFF])
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (damaged, *args))
    conn.close()
