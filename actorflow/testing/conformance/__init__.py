"""The store conformance suite: run it in the tests of a store of your own (needs pytest).

Every store actorflow ships passes it, through this same entry point. In a
test module of yours::

    import pytest

    from actorflow.testing.conformance import StoreConformance
    from my_package import MyStore


    class TestMyStore(StoreConformance):
        @pytest.fixture
        async def store(self, tmp_path):
            store = MyStore(tmp_path / "data")
            yield store
            await store.aclose()

Install pytest and trio with the extra ``actorflow[testing]``; see
docs/storage.md, "Writing your own store".
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401  (only to say what is missing)
except ModuleNotFoundError as exc:  # the core install has no pytest
    raise ModuleNotFoundError(
        "actorflow.testing.conformance runs under pytest: pip install 'actorflow[testing]'",
        name=exc.name,
    ) from exc

from actorflow.testing.conformance._suite import StoreConformance

__all__ = ["StoreConformance"]
