"""The project's own stores through the shipped conformance suite, as a third party runs it.

``actorflow.testing.conformance.StoreConformance`` holds the tests; each runs
once per store factory in ``conftest.STORES`` (memory, file, S3 on SeaweedFS
and moto, with several codecs) and per event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow.storage import FileStore, MemoryStore
from actorflow.storage.s3._store import S3Store
from actorflow.testing.conformance import StoreConformance

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.storage import Store


class TestStores(StoreConformance):
    """Memory, file and S3 stores."""

    @pytest.fixture
    def store(self, store: Store) -> Store:
        """The conftest's store: one of each registered kind, open and empty."""
        return store

    @pytest.fixture
    def reopen(self) -> Callable[[Store], Store] | None:
        """File stores open their folder again, S3 ones their prefix; memory ones cannot."""
        return _reopen

    @pytest.fixture
    def damage_inbox_entry(self) -> Callable[[Store, str, int], Awaitable[None]] | None:
        """A byte flipped in the entry's bytes, wherever the store keeps them."""
        return _damage_inbox_entry


async def _damage_inbox_entry(store: Store, run_id: str, seq: int) -> None:
    if isinstance(store, MemoryStore):
        stored = store._runs[run_id].inbox
        stored[seq] = _flipped(stored[seq])
    elif isinstance(store, FileStore):
        path = anyio.Path(store.path, "runs", run_id, "inbox", f"{seq:020d}.msg")
        await path.write_bytes(_flipped(await path.read_bytes()))
    elif isinstance(store, S3Store):
        key = store._objects.key(run_id, "inbox", f"{seq:020d}")
        wire = store._objects.wire
        body = await store._objects.get_or_none("test", key)
        assert body is not None
        await wire.call("test", "put_object", Key=key, Body=_flipped(body))
    else:
        pytest.skip("no way to damage this store's inbox here")


def _flipped(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def _reopen(store: Store) -> Store:
    if isinstance(store, FileStore):
        return FileStore(store.path, codec=store.codec, fs=store.fs)
    if isinstance(store, S3Store):
        o = store._objects.wire.options
        return S3Store(
            o.bucket,
            prefix=store.prefix,
            endpoint_url=o.endpoint_url,
            region_name=o.region_name,
            aws_access_key_id=o.aws_access_key_id,
            aws_secret_access_key=o.aws_secret_access_key,
            codec=store.codec,
        )
    pytest.skip("only file and S3 stores are reopened here")
