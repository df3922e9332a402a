"""FileStore: runs in a local folder; the embedded default.

Layout::

    <path>/runs/<run id>/
        manifest                      the run's manifest, replaced atomically
        lock                          flock'ed by the run's live owner
        owner                         the current lease (owner, epoch)
        log/00000000000000000000.seg  append-only segments, named by first position
        blobs/<address>               content-addressed states, written once
        snapshots/000000042_20260125T101500Z_draft%231_<id>~<trigger>~<time>~<sizes>.ckpt
                                      each name lists its snapshot (see _snapfiles)

Every durable operation is one call in a worker thread (:mod:`._threads`);
files written once go through temp file, fsync, rename and folder fsync. The
log is appended by group commit (:mod:`actorflow.storage._filelog`). The log
and blob methods are in :mod:`._file_data`, the snapshot methods in
:mod:`._file_snapshots`.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from actorflow._log import get_logger
from actorflow.errors import (
    ActorflowError,
    CorruptedDataError,
    LeaseLostError,
    RunLockedError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage._codec import Codec, Kind
from actorflow.storage._file_data import FileData
from actorflow.storage._file_snapshots import FileSnapshots
from actorflow.storage._fs import FileSystem, OSFileSystem, write_atomic
from actorflow.storage._manifests import matches
from actorflow.storage._manifests import tombstone as make_tombstone
from actorflow.storage._msgpack import decode_lease, encode_lease
from actorflow.storage._protocol import Lease, PruneReport, RetentionPolicy, StoreContext
from actorflow.storage._records import validate_run_id
from actorflow.storage._retention import prune as prune_by_policy
from actorflow.storage._threads import run_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.storage._filelog import FileLog
    from actorflow.storage._records import RunManifest, RunStatus

__all__ = ["FileStore"]

_log = get_logger(__name__)
T = TypeVar("T")


class FileStore(FileData, FileSnapshots, StoreContext):
    """Runs stored under a local folder (created on first use).

    Args:
        path: the store's folder.
        codec: how data is sealed (default: zstd if installed, else gzip-6).
        segment_bytes: a log segment is closed and a new one started past this size.
        fs: the file layer; tests inject one that simulates power loss.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        codec: Codec | None = None,
        segment_bytes: int = 16 * 1024 * 1024,
        fs: FileSystem | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.codec = codec or Codec()
        self.fs = fs or OSFileSystem()
        self.segment_bytes = segment_bytes
        self._runs_dir = os.path.join(self.path, "runs")
        self._ready = False
        self._logs: dict[str, FileLog] = {}
        self._log_lock = anyio.Lock()
        self._leases: dict[str, tuple[Lease, int]] = {}
        # new runs claimed by create_run for the owner their manifest names
        self._created_claims: dict[str, tuple[Lease, int]] = {}
        # runs this store created and claimed, not appended to yet: their logs are empty
        self._empty_logs: set[str] = set()

    def __repr__(self) -> str:
        return f"FileStore({self.path!r}, codec={self.codec.describe()})"

    # --- plumbing -----------------------------------------------------------------

    async def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        """Run one durable operation in a worker thread, translating OS errors."""
        try:
            return await run_in_thread(self._guarded, fn, args)
        except ActorflowError:
            raise
        except OSError as exc:
            raise StorageError(operation, f"{exc.strerror or exc} ({exc.filename})") from exc

    def _guarded(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        if not self._ready:
            self.fs.makedirs(self._runs_dir)
            self._ready = True
        return fn(*args)

    def _dir(self, run_id: str, *parts: str) -> str:
        return os.path.join(self._runs_dir, validate_run_id(run_id), *parts)

    def _read_manifest(self, run_id: str) -> RunManifest:
        path = self._dir(run_id, "manifest")
        try:
            data = self.fs.read(path)
        except FileNotFoundError:
            raise RunNotFoundError(run_id) from None
        return self.codec.load_manifest(data, run_id=run_id, location=path)

    def _write_manifest(self, manifest: RunManifest) -> None:
        write_atomic(
            self.fs, self._dir(manifest.run_id, "manifest"), self.codec.dump_manifest(manifest)
        )

    def _change_manifest(
        self, run_id: str, change: Callable[[RunManifest], RunManifest]
    ) -> RunManifest:
        # flock on a side file makes read-change-write atomic across threads and processes
        handle = self.fs.lock(self._dir(run_id, "manifest.lock")) if self._exists(run_id) else None
        if handle is None:
            raise RunNotFoundError(run_id)
        try:
            new = change(self._read_manifest(run_id))
            if new.run_id != run_id:
                raise StorageError("update run", f"change() may not rename run {run_id!r}")
            self._write_manifest(new)
            return new
        finally:
            self.fs.unlock(handle)

    def _exists(self, run_id: str) -> bool:
        return self.fs.exists(self._dir(run_id, "manifest"))

    # --- lifecycle ------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close log files and release every claim this store holds. Idempotent."""
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        for _lease, handle in [*self._leases.values(), *self._created_claims.values()]:
            self.fs.unlock(handle)
        self._leases.clear()
        self._created_claims.clear()
        self._empty_logs.clear()

    # --- manifests ------------------------------------------------------------------

    async def create_run(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """See :meth:`Store.create_run`.

        A new run whose manifest names an ``owner`` is claimed for it in the
        same call: no other process can take it for an orphan before its
        owner's ``claim``, which then costs nothing.
        """
        run_id = validate_run_id(manifest.run_id)
        stored, created, held = await self._call("create run", self._create, run_id, manifest)
        if held is not None:
            self._created_claims[run_id] = held
            self._empty_logs.add(run_id)  # and nobody else can write it while we hold it
        return stored, created

    def _create(
        self, run_id: str, manifest: RunManifest
    ) -> tuple[RunManifest, bool, tuple[Lease, int] | None]:
        if self._exists(run_id):
            return self._read_manifest(run_id), False, None
        self.fs.makedirs(self._dir(run_id))
        for sub in ("log", "blobs", "snapshots"):
            # made durable by the run folder's fsync that commits the manifest
            self.fs.mkdir(self._dir(run_id, sub))
        data = self.codec.dump_manifest(manifest)
        if not write_atomic(self.fs, self._dir(run_id, "manifest"), data, exclusive=True):
            return self._read_manifest(run_id), False, None
        held = None
        if manifest.owner is not None:
            try:
                held = self._claim(run_id, manifest.owner)
            except RunLockedError:
                pass  # someone probing it this very moment: the owner's claim will tell
        return manifest, True, held

    async def read_run(self, run_id: str) -> RunManifest:
        """See :meth:`Store.read_run`."""
        validate_run_id(run_id)
        return await self._call("read run", self._read_manifest, run_id)

    async def update_run(
        self, run_id: str, change: Callable[[RunManifest], RunManifest]
    ) -> RunManifest:
        """See :meth:`Store.update_run`. ``change`` runs in a worker thread."""
        validate_run_id(run_id)
        return await self._call("update run", self._change_manifest, run_id, change)

    async def list_runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
    ) -> list[RunManifest]:
        """See :meth:`Store.list_runs`."""
        manifests = await self._call("list runs", self._list_runs)
        manifests.sort(key=lambda m: (m.created, m.run_id))
        return [m for m in manifests if matches(m, status, workflow)]

    def _list_runs(self) -> list[RunManifest]:
        found = []
        for name in self.fs.listdir(self._runs_dir):
            if name.startswith(".") or not self._exists(name):
                continue
            found.append(self._read_manifest(name))
        return found

    async def delete_run(self, run_id: str, *, tombstone: bool = True) -> int:
        """See :meth:`Store.delete_run`."""
        validate_run_id(run_id)
        log = self._logs.pop(run_id, None)
        if log is not None:
            log.close()
        self._empty_logs.discard(run_id)
        return await self._call("delete run", self._delete_run, run_id, tombstone)

    def _delete_run(self, run_id: str, tombstone: bool) -> int:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        if tombstone:
            self._change_manifest(run_id, make_tombstone)
            doomed = [self._dir(run_id, sub) for sub in ("log", "blobs", "snapshots")]
        else:
            doomed = [self._dir(run_id)]
        freed = 0
        for folder in doomed:
            # Renamed away first, so a crash midway never leaves half a run looking whole.
            trash = os.path.join(self._runs_dir, f".trash-{secrets.token_hex(8)}")
            freed += self._tree_size(folder)
            self.fs.rename(folder, trash)
            self.fs.fsync_dir(os.path.dirname(folder))
            self.fs.remove_tree(trash)
        if tombstone:
            for sub in ("log", "blobs", "snapshots"):
                self.fs.makedirs(self._dir(run_id, sub))
        return freed

    def _tree_size(self, path: str) -> int:
        total = 0
        for name in self.fs.listdir(path):
            child = os.path.join(path, name)
            total += self._tree_size(child) if self.fs.is_dir(child) else self.fs.size(child)
        return total

    # --- ownership ------------------------------------------------------------------

    async def claim(self, run_id: str, owner: str) -> Lease:
        """See :meth:`Store.claim`: an exclusive ``flock`` held until release or exit."""
        validate_run_id(run_id)
        held = self._created_claims.pop(run_id, None)
        if held is not None:
            if held[0].owner == owner and run_id not in self._leases:
                self._leases[run_id] = held
                return held[0]
            self.fs.unlock(held[1])  # claimed at creation for someone else: let go
            self._empty_logs.discard(run_id)
        lease, handle = await self._call("claim run", self._claim, run_id, owner)
        self._leases[run_id] = (lease, handle)
        self._forget_log(run_id)  # others may have appended since: read it afresh
        return lease

    def _forget_log(self, run_id: str) -> None:
        """Let go of the run's open log file (closed now, unless an append is in flight).

        Appends write at the offset this store last knew, so a log kept open
        across another owner's appends would write over them.
        """
        log = self._logs.get(run_id)
        if log is not None and log.idle:  # one in use stays, to be closed later
            del self._logs[run_id]
            log.close()

    def _claim(self, run_id: str, owner: str) -> tuple[Lease, int]:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        handle = self.fs.try_lock(self._dir(run_id, "lock"))
        if handle is None:
            previous = self._read_lease(run_id)
            raise RunLockedError(run_id, previous.owner if previous else None)
        try:
            previous = self._read_lease(run_id)
            lease = Lease(run_id=run_id, owner=owner, epoch=(previous.epoch if previous else 0) + 1)
            sealed = self.codec.seal(
                encode_lease(lease), kind=Kind.LEASE, run_id=run_id, slot="owner"
            )
            # The flock is the claim and dies with its process; this file only
            # names the owner for `RunLockedError`, so it needs no fsync.
            write_atomic(self.fs, self._dir(run_id, "owner"), sealed, durable=False)
        except BaseException:
            self.fs.unlock(handle)
            raise
        return lease, handle

    def _read_lease(self, run_id: str) -> Lease | None:
        path = self._dir(run_id, "owner")
        try:
            data = self.fs.read(path)
            raw = self.codec.open(data, kind=Kind.LEASE, run_id=run_id, slot="owner", location=path)
        except (FileNotFoundError, CorruptedDataError):
            return None  # the lock itself is the claim; the lease file only names it
        return decode_lease(raw, path)

    async def renew(self, lease: Lease) -> Lease:
        """See :meth:`Store.renew`: a claim held by ``flock`` needs no renewal."""
        held = self._leases.get(lease.run_id)
        if held is None or held[0] != lease:
            raise LeaseLostError(lease.run_id, lease.epoch)
        return lease

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        held = self._leases.get(lease.run_id)
        if held is not None and held[0] == lease:
            del self._leases[lease.run_id]
            self._empty_logs.discard(lease.run_id)
            # while still the owner; and a store that lives long would otherwise
            # hold one open file per run it ever wrote
            self._forget_log(lease.run_id)
            self.fs.unlock(held[1])

    async def is_owned(self, run_id: str) -> bool:
        """See :meth:`Store.is_owned`: tries the lock without keeping it."""
        validate_run_id(run_id)
        if run_id in self._leases or run_id in self._created_claims:
            return True
        return await self._call("check owner", self._probe_lock, run_id)

    def _probe_lock(self, run_id: str) -> bool:
        if not self._exists(run_id):
            raise RunNotFoundError(run_id)
        handle = self.fs.try_lock(self._dir(run_id, "lock"))
        if handle is None:
            return True
        self.fs.unlock(handle)
        return False

    @property
    def renew_interval(self) -> float | None:
        """``None``: the operating system ends a claim with its process."""
        return None

    # --- retention ------------------------------------------------------------------

    async def prune(self, policy: RetentionPolicy) -> PruneReport:
        """See :meth:`Store.prune`."""
        return await prune_by_policy(self, policy)
