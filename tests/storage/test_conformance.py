"""The project's own stores through the shipped conformance suite, as a third party runs it.

``actorflow.testing.conformance.StoreConformance`` holds the tests; each runs
once per store factory in ``conftest.STORES`` (memory, file, S3 on SeaweedFS
and moto, with several codecs) and per event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.storage import FileStore
from actorflow.storage.s3._store import S3Store
from actorflow.testing.conformance import StoreConformance

if TYPE_CHECKING:
    from collections.abc import Callable

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
