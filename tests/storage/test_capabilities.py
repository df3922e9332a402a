"""Optional capabilities never break a store written against the ``Store`` protocol alone."""

from __future__ import annotations

from typing import Any, cast

import pytest

from actorflow.storage import (
    ClaimInspector,
    MemoryStore,
    SealChecker,
    Store,
    UnreadableLister,
)
from actorflow.testing.conformance import StoreConformance

STORE_METHODS = (
    "aclose",
    "create_run",
    "read_run",
    "update_run",
    "list_runs",
    "delete_run",
    "append",
    "read_log",
    "log_length",
    "truncate_log_before",
    "put_blob",
    "get_blob",
    "has_blob",
    "list_blobs",
    "delete_blob",
    "write_snapshot",
    "read_snapshot",
    "list_snapshots",
    "delete_snapshot",
    "claim",
    "renew",
    "release",
    "is_owned",
    "prune",
)
"""What a store written against actorflow 0.1's ``Store`` has (and ``renew_interval``)."""


class ThirdPartyStore:
    """A store someone else wrote: the protocol's methods, no optional capability."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    @property
    def renew_interval(self) -> float | None:
        return None


def _delegate(name: str) -> Any:
    async def method(self: ThirdPartyStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in STORE_METHODS:
    setattr(ThirdPartyStore, _name, _delegate(_name))


def test_a_store_with_only_the_protocol_s_methods_is_a_store() -> None:
    store = ThirdPartyStore()
    assert isinstance(store, Store)
    assert not isinstance(store, UnreadableLister)
    assert not isinstance(store, ClaimInspector)
    assert not isinstance(store, SealChecker)


def test_actorflow_s_stores_have_every_capability() -> None:
    store = MemoryStore()
    for capability in (Store, UnreadableLister, ClaimInspector, SealChecker):
        assert isinstance(store, capability)


class TestThirdPartyStore(StoreConformance):
    """The shipped suite passes it: the optional capabilities' tests are skipped."""

    @pytest.fixture
    def store(self) -> Store:
        return cast("Store", ThirdPartyStore())
