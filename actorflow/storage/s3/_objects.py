"""Objects under one store's prefix: keys, conditional writes with tokens, listings.

Every conditional PUT carries a random token in its metadata. When a PUT meets
412 Precondition Failed, the object there is read back: if it holds this
write's token, the write is ours (an earlier attempt that landed before a
retry or a cancellation) and counts as done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import StorageError
from actorflow.storage._records import validate_run_id
from actorflow.storage.s3._wire import NotFound, ObjectInfo, PreconditionFailed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from actorflow.storage.s3._wire import S3Wire

__all__ = ["TOKEN", "S3Objects"]

TOKEN = "af-token"
"""User-metadata key of a write's token."""


class S3Objects:
    """Typed access to the objects of one store (bucket + prefix)."""

    def __init__(self, wire: S3Wire, prefix: str, *, max_concurrency: int) -> None:
        self.wire = wire
        self.bucket = wire.options.bucket
        self.prefix = prefix
        self.root = f"{prefix}runs/"
        self._limit = anyio.CapacityLimiter(max_concurrency)
        self.page_size = 1000

    def key(self, run_id: str, *parts: str) -> str:
        """The key of ``parts`` under the run's folder (the run id validated)."""
        return f"{self.root}{validate_run_id(run_id)}/" + "/".join(parts)

    def store_key(self, *parts: str) -> str:
        """The key of ``parts`` beside the runs' folder (the store's own objects)."""
        return self.prefix + "/".join(parts)

    def location(self, key: str) -> str:
        """An ``s3://`` URL for messages."""
        return f"s3://{self.bucket}/{key}"

    async def get(self, operation: str, key: str) -> tuple[bytes, ObjectInfo]:
        """The object's bytes and description.

        Raises:
            NotFound: no such object.
        """
        r = await self.wire.call(operation, "get_object", Key=key)
        body: bytes = r["Body"]
        return body, ObjectInfo(key, len(body), r.get("ETag", ""), dict(r.get("Metadata", {})))

    async def get_or_none(self, operation: str, key: str) -> bytes | None:
        """The object's bytes, or ``None`` if it is absent."""
        try:
            data, _ = await self.get(operation, key)
        except NotFound:
            return None
        return data

    async def get_or_none_with_etag(self, operation: str, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag, or ``None`` if it is absent."""
        got = await self.fetch(operation, key)
        return None if got is None else (got[0], got[1].etag)

    async def fetch(self, operation: str, key: str) -> tuple[bytes, ObjectInfo] | None:
        """The object's bytes and description (with its metadata), or ``None`` if absent."""
        try:
            return await self.get(operation, key)
        except NotFound:
            return None

    async def head(self, operation: str, key: str) -> ObjectInfo | None:
        """The object's description, or ``None`` if it is absent."""
        try:
            r = await self.wire.call(operation, "head_object", Key=key)
        except NotFound:
            return None
        return ObjectInfo(
            key, int(r.get("ContentLength", 0)), r.get("ETag", ""), dict(r.get("Metadata", {}))
        )

    async def put(
        self,
        operation: str,
        key: str,
        body: bytes,
        *,
        token: str,
        if_match: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Create ``key`` (``If-None-Match: *``), or replace it if its ETag is ``if_match``.

        Returns:
            The new ETag.

        Raises:
            PreconditionFailed: another writer's object is there (described by its
                ``found``), or the ETag moved (or, with ``if_match``, the object is gone).
        """
        cond = {"IfMatch": if_match} if if_match is not None else {"IfNoneMatch": "*"}
        meta = {TOKEN: token, **(metadata or {})}
        try:
            r = await self.wire.call(
                operation, "put_object", Key=key, Body=body, Metadata=meta, **cond
            )
        except PreconditionFailed as exc:
            info = await self.head(operation, key)
            if info is not None and info.metadata.get(TOKEN) == token:
                return info.etag
            exc.found = info
            raise
        except NotFound:
            # If-Match on a missing key: some servers answer 404 rather than 412.
            if if_match is None:
                raise
            raise PreconditionFailed(f"{key} is gone") from None
        return str(r.get("ETag", ""))

    async def overwrite(self, operation: str, key: str, body: bytes) -> None:
        """Write ``key`` whatever is there: for objects only this store ever writes."""
        await self.wire.call(operation, "put_object", Key=key, Body=body)

    async def list_objects(self, operation: str, prefix: str) -> list[ObjectInfo]:
        """Every object under ``prefix``, in key order, following pagination."""
        found: list[ObjectInfo] = []
        kwargs: dict[str, Any] = {"Prefix": prefix, "MaxKeys": self.page_size}
        while True:
            r = await self.wire.call(operation, "list_objects_v2", **kwargs)
            found.extend(
                ObjectInfo(o["Key"], int(o.get("Size", 0)), o.get("ETag", ""))
                for o in r.get("Contents", ())
            )
            if not r.get("IsTruncated"):
                return sorted(found, key=lambda o: o.key)
            kwargs["ContinuationToken"] = r["NextContinuationToken"]

    async def delete(self, operation: str, keys: Sequence[str]) -> None:
        """Delete ``keys`` (absent ones are fine), 1000 per request."""
        for i in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[i : i + 1000]]
            r = await self.wire.call(
                operation, "delete_objects", Delete={"Objects": chunk, "Quiet": True}
            )
            if r.get("Errors"):
                first = r["Errors"][0]
                raise StorageError(
                    operation, f"could not delete {first.get('Key')}: {first.get('Message')}"
                )

    async def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Run ``calls`` concurrently (bounded), results in order."""
        results: list[Any] = [None] * len(calls)

        async def one(i: int) -> None:
            async with self._limit:
                results[i] = await calls[i]()

        async with anyio.create_task_group() as tg:
            for i in range(len(calls)):
                tg.start_soon(one, i)
        return results
