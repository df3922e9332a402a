"""An S3 store's manifests: one object per run, replaced by ETag compare-and-swap.

The store remembers which runs exist and the last manifest (and ETag) it saw
of each: a right guess saves a GET before an update, a wrong one costs a 412.
A manifest records the epoch of the last owner that replaced it
(``RunManifest.epoch``): an owner never replaces one a newer owner wrote
(``_fencing.py``). It is in the sealed bytes, so a new epoch always moves the
ETag, and the compare-and-swap of a stale owner fails.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from functools import partial
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow.errors import (
    CorruptedDataError,
    EncryptionKeyError,
    InvalidRunIdError,
    LeaseLostError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage._manifests import (
    corrupt_manifest,
    data_without_manifest,
    encrypted_manifest,
    not_a_run,
)
from actorflow.storage._protocol import UnreadableEntry
from actorflow.storage._records import RunManifest, validate_run_id
from actorflow.storage.s3._wire import NotFound, PreconditionFailed, drop_idle_lock

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["ManifestObjects"]

_CAS_ATTEMPTS = 1000


class ManifestObjects:
    """The runs' manifests under ``objects``, sealed by ``codec``."""

    def __init__(self, objects: S3Objects, codec: Codec) -> None:
        self._objects = objects
        self._codec = codec
        self._known: set[str] = set()
        self._cache: dict[str, tuple[RunManifest, str]] = {}
        self._locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)

    async def require(self, run_id: str) -> None:
        """Raise RunNotFoundError unless the run's manifest exists."""
        if run_id in self._known:
            return
        if await self._objects.head("read run", self._objects.key(run_id, "manifest")) is None:
            raise RunNotFoundError(run_id)
        self._known.add(run_id)

    async def create(self, manifest: RunManifest) -> tuple[RunManifest, bool]:
        """Store a new run's manifest unless one exists: ``(stored, created)``."""
        key = self._objects.key(manifest.run_id, "manifest")
        if manifest.epoch:  # a new run has had no owner yet
            manifest = msgspec.structs.replace(manifest, epoch=0)
        sealed = self._codec.dump_manifest(manifest)
        try:
            etag = await self._objects.put("create run", key, sealed, token=uuid.uuid4().hex)
        except PreconditionFailed:
            existing, _ = await self.read(manifest.run_id)
            return existing, False
        self._known.add(manifest.run_id)
        self._cache[manifest.run_id] = (manifest, etag)  # the first update needs no GET
        return manifest, True

    async def read(self, run_id: str) -> tuple[RunManifest, str]:
        """The run's manifest and its ETag.

        Raises:
            RunNotFoundError: no such run.
        """
        key = self._objects.key(run_id, "manifest")
        try:
            data, info = await self._objects.get("read run", key)
        except NotFound:
            self._known.discard(run_id)
            self._cache.pop(run_id, None)
            raise RunNotFoundError(run_id) from None
        location = self._objects.location(key)
        manifest = self._codec.load_manifest(data, run_id=run_id, location=location)
        self._cache[run_id] = (manifest, info.etag)
        return manifest, info.etag

    async def update(
        self,
        run_id: str,
        change: Callable[[RunManifest], RunManifest],
        *,
        epoch: int | None = None,
    ) -> RunManifest:
        """Replace the manifest by ETag compare-and-swap; ``change`` re-runs on conflict.

        ``epoch`` is the writer's lease epoch (``None``: it holds none, and
        the manifest keeps the epoch it has).

        Raises:
            LeaseLostError: the manifest was written under a newer epoch than ``epoch``.
        """
        key = self._objects.key(run_id, "manifest")
        async with self._locks[run_id]:
            for _ in range(_CAS_ATTEMPTS):
                # The last version this store saw is a good guess; a wrong one costs a 412.
                cached = self._cache.pop(run_id, None)
                current, etag = cached or await self.read(run_id)
                if epoch is not None and current.epoch > epoch:
                    raise LeaseLostError(run_id, epoch)
                new = change(current)
                if new.run_id != run_id:
                    raise StorageError("update run", f"change() may not rename run {run_id!r}")
                written = current.epoch if epoch is None else epoch
                if new.epoch != written:
                    new = msgspec.structs.replace(new, epoch=written)
                sealed = self._codec.dump_manifest(new)
                try:
                    etag = await self._objects.put(
                        "update run", key, sealed, token=uuid.uuid4().hex, if_match=etag
                    )
                except PreconditionFailed:
                    continue  # another process replaced it first: apply change to theirs
                self._cache[run_id] = (new, etag)
                return new
        raise StorageError("update run", f"run {run_id!r}: the manifest kept changing; try again")

    async def read_all(self) -> tuple[list[RunManifest], list[UnreadableEntry]]:
        """Every run's manifest (one LIST, then concurrent GETs), in no particular order,
        and what is not a readable run."""
        root = self._objects.root
        folders: defaultdict[str, set[str]] = defaultdict(set)
        for o in await self._objects.list_objects("list runs", root):
            name, slash, rest = o.key[len(root) :].partition("/")
            folders[name].add(rest if slash else "/")  # "/": an object named like a run
        run_ids: list[str] = []
        unreadable: list[UnreadableEntry] = []
        for name, rests in folders.items():
            location = self._objects.location(f"{root}{name}")
            try:
                validate_run_id(name)
            except InvalidRunIdError:
                unreadable.append(not_a_run(location))
                continue
            if "manifest" in rests:
                run_ids.append(name)
            elif "/" in rests:
                unreadable.append(not_a_run(location))
            else:
                unreadable.append(data_without_manifest(name, f"{location}/"))
        found = await self._objects.gather([partial(self._read_or_entry, r) for r in run_ids])
        manifests = [m for m in found if isinstance(m, RunManifest)]
        unreadable.extend(e for e in found if isinstance(e, UnreadableEntry))
        return manifests, unreadable

    async def versions(self) -> dict[str, str]:
        """Each run's manifest ETag, from one LIST (see ``list_run_versions``)."""
        root = self._objects.root
        found: dict[str, str] = {}
        for o in await self._objects.list_objects("list run versions", root):
            name, _, rest = o.key[len(root) :].partition("/")
            if rest == "manifest" and o.etag:
                try:
                    found[validate_run_id(name)] = o.etag
                except InvalidRunIdError:
                    continue  # no run: list_unreadable names it
        return found

    async def _read_or_entry(self, run_id: str) -> RunManifest | UnreadableEntry | None:
        try:
            manifest, _ = await self.read(run_id)
        except RunNotFoundError:
            return None  # deleted while we listed
        except CorruptedDataError as exc:
            return corrupt_manifest(run_id, exc)
        except EncryptionKeyError as exc:
            location = self._objects.location(self._objects.key(run_id, "manifest"))
            return encrypted_manifest(run_id, location, exc)
        return manifest

    def forget(self, run_id: str) -> None:
        """Drop the cached manifest and the run's lock (unless in use): another may change it."""
        self._cache.pop(run_id, None)
        drop_idle_lock(self._locks, run_id)

    def discard(self, run_id: str) -> None:
        """The run is gone: forget that it existed."""
        self._known.discard(run_id)
        self._cache.pop(run_id, None)
