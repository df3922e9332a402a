"""An S3 store's blobs: content-addressed objects under each run, written once."""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING

import anyio.to_thread

from actorflow.errors import StorageError
from actorflow.storage._manifests import blob_addresses, validate_blob_ref
from actorflow.storage.s3._wire import NotFound, PreconditionFailed

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["BlobObjects"]


class BlobObjects:
    """The runs' blobs under ``objects``, sealed by ``codec``; callers check that the run exists."""

    def __init__(self, objects: S3Objects, codec: Codec) -> None:
        self._objects = objects
        self._codec = codec

    def _key(self, run_id: str, ref: str) -> str:
        return self._objects.key(run_id, "blobs", validate_blob_ref(ref))

    async def put(self, run_id: str, data: bytes) -> str:
        """Store ``data`` (sealed in a worker thread) unless it is there; return its address."""
        # sealing a large state takes milliseconds: in a thread, the loop runs on
        seal = functools.partial(self._codec.dump_blob, data, run_id=run_id)
        address, sealed = await anyio.to_thread.run_sync(seal)
        try:
            key = self._objects.key(run_id, "blobs", address)
            await self._objects.put("put blob", key, sealed, token=uuid.uuid4().hex)
        except PreconditionFailed:
            pass  # content-addressed: these bytes are already there
        return address

    async def get(self, run_id: str, ref: str) -> bytes:
        """The blob ``ref``, verified.

        Raises:
            StorageError: the run has no such blob.
        """
        key = self._key(run_id, ref)
        try:
            data, _ = await self._objects.get("get blob", key)
        except NotFound:
            raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}") from None
        location = self._objects.location(key)
        return self._codec.load_blob(data, run_id=run_id, address=ref, location=location)

    async def exists(self, run_id: str, ref: str) -> bool:
        """Whether the blob ``ref`` exists."""
        return await self._objects.head("has blob", self._key(run_id, ref)) is not None

    async def addresses(self, run_id: str) -> list[str]:
        """The addresses of the run's blobs, sorted; foreign objects are skipped with a warning."""
        prefix = self._objects.key(run_id, "blobs", "")
        listed = await self._objects.list_objects("list blobs", prefix)
        names = sorted(o.key[len(prefix) :] for o in listed)
        return blob_addresses(names, self._objects.location(prefix.rstrip("/")))

    async def delete(self, run_id: str, ref: str) -> int:
        """Delete the blob ``ref``; the bytes freed (0 if it was absent)."""
        key = self._key(run_id, ref)
        info = await self._objects.head("delete blob", key)
        if info is None:
            return 0
        await self._objects.delete("delete blob", [key])
        return info.size
