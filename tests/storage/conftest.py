"""The ``store`` fixture: every conformance test runs once per registered store factory.

``test_conformance.py`` hands it to the shipped suite
(``actorflow.testing.conformance.StoreConformance``), as a third party would.

Adding a backend (for example the S3 store)
-------------------------------------------
Put a module named ``factories_<name>.py`` in this folder with a dict ``FACTORIES``
mapping a test id to a :data:`StoreFactory`; this conftest imports every such
module and adds its entries to :data:`STORES`. A factory is an async context
manager taking the fixture ``request`` (use ``request.getfixturevalue(...)`` to
get a session-scoped server that starts lazily, only when an S3 test runs) and a
fresh temporary folder, yielding an open store and closing it afterwards::

    @contextlib.asynccontextmanager
    async def s3_store(request: pytest.FixtureRequest, tmp: Path) -> AsyncIterator[Store]:
        server = request.getfixturevalue("seaweed_server")
        store = S3Store(server.bucket, prefix=tmp.name, endpoint_url=server.url)
        try:
            yield store
        finally:
            await store.aclose()

    FACTORIES = {"s3-seaweed": s3_store}

Mark slow factories by wrapping them: ``FACTORIES = {"s3": pytest.param(s3_store,
marks=pytest.mark.slow)}`` is accepted too. ``-k memory`` / ``-k file`` select
backends by id.
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
from typing import TYPE_CHECKING, Any, TypeAlias

import pytest

from actorflow.storage import Codec, FileStore, MemoryStore, Store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

StoreFactory: TypeAlias = (
    "Callable[[pytest.FixtureRequest, pathlib.Path], contextlib.AbstractAsyncContextManager[Store]]"
)

KEY = bytes(range(32))


@contextlib.asynccontextmanager
async def _closing(store: Any) -> AsyncIterator[Store]:
    try:
        yield store
    finally:
        await store.aclose()


def _memory(codec: Callable[[], Codec]) -> StoreFactory:
    return lambda _request, _tmp: _closing(MemoryStore(codec=codec()))


def _file(codec: Callable[[], Codec]) -> StoreFactory:
    return lambda _request, tmp: _closing(FileStore(tmp / "store", codec=codec()))


STORES: dict[str, Any] = {
    "memory": _memory(Codec),
    "memory-aes": _memory(lambda: Codec(keys={"k1": KEY})),
    "file": _file(Codec),
    "file-gzip": _file(lambda: Codec(compression="gzip", compress_above=64)),
    "file-zstd-aes": _file(lambda: Codec(compression="zstd", compress_above=64, keys={"k1": KEY})),
    "file-plain": _file(lambda: Codec(compression=None)),
}
"""Store factories by test id; ``factories_*.py`` modules here add theirs."""

for _path in sorted(pathlib.Path(__file__).parent.glob("factories_*.py")):
    STORES.update(importlib.import_module(f"tests.storage.{_path.stem}").FACTORIES)


def _params() -> list[Any]:
    params = []
    for name, factory in STORES.items():
        if isinstance(factory, type(pytest.param(None))):
            params.append(pytest.param(*factory.values, id=name, marks=factory.marks))
        else:
            params.append(pytest.param(factory, id=name))
    return params


@pytest.fixture(params=_params())
async def store(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> AsyncIterator[Store]:
    """An open, empty store of each registered kind."""
    async with request.param(request, tmp_path) as opened:
        yield opened
