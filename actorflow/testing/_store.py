"""``CrashingStore``: a store that 'dies' at a chosen point of the log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import StorageError
from actorflow.storage import (
    put_unsynced_blob,
    sync_blobs,
    sync_snapshots,
    update_run_unsynced,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage import Lease, LogRecord, RunManifest, Snapshot, SnapshotInfo, Store

__all__ = ["CrashingStore", "SimulatedCrashError"]


class SimulatedCrashError(StorageError):
    """A write after the simulated crash: the process is 'dead'."""

    def __init__(self) -> None:
        super().__init__("write", "the process crashed (simulated by actorflow.testing)")


class CrashingStore:
    """A store that 'dies' once ``crash_after`` log records are durable.

    Reads pass through; after the crash every write raises
    ``SimulatedCrashError`` and the claims taken through it are released
    underneath, as a dead process's locks are.
    """

    def __init__(self, inner: Store, *, crash_after: int) -> None:
        self.inner = inner
        self.crash_after = crash_after
        self.appended = 0
        self.crashed = anyio.Event()
        self._leases: list[Lease] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check(self) -> None:
        if self.crashed.is_set():
            raise SimulatedCrashError

    async def _die(self) -> None:
        self.crashed.set()
        # shielded: whoever waits on `crashed` may cancel the caller now, and a
        # lease left behind would lock the run against its recovery
        with anyio.CancelScope(shield=True):
            for lease in self._leases:
                await self.inner.release(lease)
        self._leases.clear()

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append up to the crash point; the record that crosses it is the last."""
        self._check()
        room = self.crash_after - self.appended
        if room <= 0:
            await self._die()
            self._check()
        batch = list(records)[:room]
        length = await self.inner.append(run_id, batch)
        self.appended += len(batch)
        if len(batch) < len(records) or self.appended >= self.crash_after:
            await self._die()
            self._check()
        return length

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Claim through the inner store, remembering the lease to drop at the crash."""
        self._check()
        lease = await self.inner.claim(run_id, owner)
        self._leases.append(lease)
        return lease

    async def release(self, lease: Lease) -> None:
        """Release, unless the 'process' is dead (then the crash released it)."""
        self._check()
        await self.inner.release(lease)

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest], *, durable: bool = True
    ) -> RunManifest:
        """Update the manifest unless crashed."""
        self._check()
        if durable:
            return await self.inner.update_run(run_id, change)
        return await update_run_unsynced(self.inner, run_id, change)

    async def write_snapshot(
        self,
        snapshot: Snapshot,
        *,
        update: Callable[[RunManifest], RunManifest] | None = None,
    ) -> SnapshotInfo:
        """Write a snapshot (and apply ``update`` to the manifest) unless crashed."""
        self._check()
        if update is None:
            return await self.inner.write_snapshot(snapshot)
        return await self.inner.write_snapshot(snapshot, update=update)

    async def sync_snapshots(self, run_id: str, snapshot_ids: Sequence[str]) -> None:
        """Make snapshots durable (where the inner store needs it) unless crashed."""
        self._check()
        await sync_snapshots(self.inner, run_id, snapshot_ids)

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """Store a blob unless crashed."""
        self._check()
        return await self.inner.put_blob(run_id, data)

    async def put_blob_unsynced(self, run_id: str, data: bytes) -> str:
        """Store a blob without a sync (where the inner store can) unless crashed."""
        self._check()
        return await put_unsynced_blob(self.inner, run_id, data)

    async def sync_blobs(self, run_id: str, addresses: Sequence[str]) -> None:
        """Make blobs durable (where the inner store needs it) unless crashed."""
        self._check()
        await sync_blobs(self.inner, run_id, addresses)

    async def aclose(self) -> None:
        """Closing the wrapper leaves the inner store open for recovery."""
