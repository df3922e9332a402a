"""S3 stores for the conformance suite: SeaweedFS (plain and encrypted) and moto.

Each test gets a fresh prefix in the session's bucket, so tests never see each
other's runs and the servers start once per session.
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from actorflow.storage._sealing import Codec
from actorflow.storage.s3._store import S3Store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    import pytest

    from actorflow.storage import Store
    from tests.storage.s3_servers import S3Server

KEY = bytes(range(32))


def open_s3_store(
    server: S3Server, codec: Codec | None = None, *, prefix: str | None = None, **options: Any
) -> S3Store:
    """A store on ``server`` under ``prefix`` (default: a prefix of its own)."""
    return S3Store(
        server.bucket,
        prefix=prefix if prefix is not None else f"t-{uuid.uuid4().hex[:12]}",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        codec=codec,
        **options,
    )


def unreachable_s3_store(max_attempts: int) -> S3Store:
    """A store whose endpoint is a closed port on 127.0.0.1: every request fails to connect."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    return S3Store(
        "bucket",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
        max_attempts=max_attempts,
        backoff_base=0.001,
    )


def sibling(store: S3Store, server: S3Server, **options: Any) -> S3Store:
    """Another store (another process, in effect) on ``store``'s prefix."""
    return open_s3_store(server, store.codec, prefix=store.prefix, **options)


@contextlib.contextmanager
def lost_at(store: S3Store, moment: str) -> Iterator[anyio.CancelScope]:
    """A scope whose PutObject is cancelled at ``moment`` (a botocore event, e.g.
    ``before-send`` or ``after-call``): the caller never learns whether it landed.
    """
    scope = anyio.CancelScope()
    caller = anyio.lowlevel.current_token()
    on_caller_loop = store._objects.wire._portal is None

    async def hook(**_: Any) -> None:
        if on_caller_loop:
            scope.cancel()
        else:
            anyio.from_thread.run_sync(scope.cancel, token=caller)
        await anyio.sleep_forever()  # until the caller's cancellation reaches us

    events = store._objects.wire._client.meta.events
    events.register(f"{moment}.s3.PutObject", hook)
    try:
        with scope:
            yield scope
    finally:
        events.unregister(f"{moment}.s3.PutObject", hook)


def _factory(fixture: str, codec: Any = Codec) -> Any:
    @contextlib.asynccontextmanager
    async def factory(request: pytest.FixtureRequest, _tmp: Path) -> AsyncIterator[Store]:
        store = open_s3_store(request.getfixturevalue(fixture), codec())
        try:
            yield store
        finally:
            await store.aclose()

    return factory


FACTORIES = {
    "s3-seaweed": _factory("seaweed_server"),
    "s3-seaweed-zstd-aes": _factory(
        "seaweed_server", lambda: Codec(compression="zstd", compress_above=64, keys={"k1": KEY})
    ),
    "s3-moto": _factory("moto_server"),
}
