"""The project's own stores through the shipped conformance suite, as a third party runs it.

``actorflow.testing.conformance.StoreConformance`` holds the tests; each runs
once per store factory in ``conftest.STORES`` (memory, file, S3 on SeaweedFS
and moto, with several codecs) and per event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.storage import FileStore
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
        """File stores open their folder again; memory ones cannot, S3 ones are not asked."""
        return _reopen_file


def _reopen_file(store: Store) -> Store:
    if not isinstance(store, FileStore):
        pytest.skip("only file stores are reopened here")
    return FileStore(store.path, codec=store.codec, fs=store.fs)
