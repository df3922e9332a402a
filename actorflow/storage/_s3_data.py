"""S3Store's decision log and blobs: the run's data, as objects under its prefix.

A mixin of :class:`~actorflow.storage._s3.S3Store`; segments are in
:mod:`actorflow.storage._s3_log`, keys and conditional writes in
:mod:`actorflow.storage._s3_objects`.
"""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING

import anyio.to_thread

from actorflow.errors import StorageError
from actorflow.storage._manifests import validate_blob_ref
from actorflow.storage._s3_io import NotFound, PreconditionFailed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage._codec import Codec
    from actorflow.storage._records import LogRecord
    from actorflow.storage._s3_lease import LeaseTable
    from actorflow.storage._s3_log import SegmentLog
    from actorflow.storage._s3_objects import S3Objects

__all__ = ["S3Data"]


class S3Data:
    """The log and blob methods of ``S3Store``, which provides what is declared here."""

    if TYPE_CHECKING:
        codec: Codec
        _o: S3Objects
        _log: SegmentLog
        _leases: LeaseTable

        async def _require(self, run_id: str) -> None: ...

    # --- decision log -------------------------------------------------------------

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append ``records`` as one segment object; return the log's new length.

        A cancelled append may or may not have landed (the request may have
        reached the server): the next append looks at the log again instead
        of trusting a cached length, so a late landing is found, never
        overwritten.

        Raises:
            LeaseLostError: this store held the run's lease and another owner took it.
        """
        await self._require(run_id)
        if not records:
            return await self._log.length(run_id)
        await self._leases.check(run_id)
        return await self._log.append(
            run_id,
            records,
            epoch=self._leases.epoch(run_id),
            on_taken=lambda: self._leases.check_taken(run_id),
        )

    async def read_log(self, run_id: str, start: int = 0) -> list[LogRecord]:
        """See :meth:`Store.read_log`; S3 writes are atomic, so no tail is ever torn."""
        await self._require(run_id)
        return await self._log.read(run_id, start)

    async def log_length(self, run_id: str) -> int:
        """See :meth:`Store.log_length`."""
        await self._require(run_id)
        return await self._log.length(run_id)

    async def truncate_log_before(self, run_id: str, position: int) -> int:
        """See :meth:`Store.truncate_log_before`."""
        await self._require(run_id)
        return await self._log.truncate_before(run_id, position)

    # --- blobs --------------------------------------------------------------------

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """See :meth:`Store.put_blob`."""
        await self._require(run_id)
        # sealing a large state takes milliseconds: in a thread, the loop runs on
        seal = functools.partial(self.codec.dump_blob, data, run_id=run_id)
        address, sealed = await anyio.to_thread.run_sync(seal)
        try:
            key = self._o.key(run_id, "blobs", address)
            await self._o.put("put blob", key, sealed, token=uuid.uuid4().hex)
        except PreconditionFailed:
            pass  # content-addressed: these bytes are already there
        return address

    async def get_blob(self, run_id: str, ref: str) -> bytes:
        """See :meth:`Store.get_blob`."""
        await self._require(run_id)
        key = self._o.key(run_id, "blobs", validate_blob_ref(ref))
        try:
            data, _ = await self._o.get("get blob", key)
        except NotFound:
            raise StorageError("get blob", f"run {run_id!r} has no blob {ref!r}") from None
        return self.codec.load_blob(
            data, run_id=run_id, address=ref, location=self._o.location(key)
        )

    async def has_blob(self, run_id: str, ref: str) -> bool:
        """See :meth:`Store.has_blob`."""
        await self._require(run_id)
        key = self._o.key(run_id, "blobs", validate_blob_ref(ref))
        return await self._o.head("has blob", key) is not None

    async def list_blobs(self, run_id: str) -> list[str]:
        """See :meth:`Store.list_blobs`."""
        await self._require(run_id)
        prefix = self._o.key(run_id, "blobs", "")
        return sorted(
            o.key[len(prefix) :] for o in await self._o.list_objects("list blobs", prefix)
        )

    async def delete_blob(self, run_id: str, ref: str) -> int:
        """See :meth:`Store.delete_blob`."""
        await self._require(run_id)
        key = self._o.key(run_id, "blobs", validate_blob_ref(ref))
        info = await self._o.head("delete blob", key)
        if info is None:
            return 0
        await self._o.delete("delete blob", [key])
        return info.size
