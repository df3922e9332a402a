"""An S3 store's queue slots: ``queues/<queue>.<n>``, each naming the worker lease that holds it.

A slot is taken by creating its object (``If-None-Match: *``), or, when the
worker it names has a lease that ran out, by replacing it under its ETag
(``If-Match``): of racing takers one wins. A slot is held as long as its
worker's lease (``_workers.py``) lives, the same clock that decides when a
run's claim may be taken, so a killed worker's slots come free with its
runs. Releasing deletes the object after checking it still names this
store's worker. A slot bound to the run it gates (``bind``) fences that run:
when this store finds its worker lease had run out and the slot taken by
another worker, the run's claim is lost (its next write fails), so a worker
that stalled past its lease does not go on beside the slot's new holder. A
timed slot (a queue's ``per_minute``) also names the time
it ends, ``until`` (the caller's clock): a slot whose worker's lease ran out
is taken over only once that time is not after the taker's ``now``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import CorruptedDataError, EncryptionKeyError
from actorflow.storage._capabilities import QueueSlot
from actorflow.storage._envelope import Kind
from actorflow.storage.s3._wire import PreconditionFailed

if TYPE_CHECKING:
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._lease import LeaseTable
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["SlotObjects"]

_FOLDER = "queues"
_SLOT = "queue-slot"
_RELEASED = "released"  # a released timed slot's worker: no lease has this name


class _Holder(msgspec.Struct, frozen=True):
    worker: str
    holder: str
    until: float = 0.0  # a timed slot's end; written by actorflow 0.6 on


_decoder = msgspec.msgpack.Decoder(_Holder)


class SlotObjects:
    """The slot objects under ``<prefix>queues/``."""

    def __init__(self, objects: S3Objects, codec: Codec, leases: LeaseTable) -> None:
        self._objects = objects
        self._codec = codec
        self._leases = leases
        self._root = objects.store_key(_FOLDER, "")
        self._bound: dict[tuple[str, int], str] = {}  # slot -> the run driven under it
        leases.fences.append(self._fence)

    def bind(self, slot: QueueSlot, run_id: str) -> None:
        """``run_id`` is driven under ``slot``: it is lost with the slot (see ``_fence``)."""
        self._bound[(slot.queue, slot.index)] = run_id

    async def _fence(self) -> None:
        """After this store's worker lease ran out: lose the runs whose slots were taken."""
        worker = self._leases.workers.worker
        for (queue, index), run_id in list(self._bound.items()):
            current = await self._read(queue, index)
            if current is None or current[0] is None or current[0].worker != worker:
                self._bound.pop((queue, index), None)
                if self._leases.holds(run_id):
                    self._leases.lose(run_id)  # its next write fails: the attempt stops
                else:
                    self._leases.refused.add(run_id)  # not claimed yet: its claim fails

    def _key(self, queue: str, index: int) -> str:
        return f"{self._root}{queue}.{index}"

    def _place(self, queue: str, index: int) -> str:
        return f"slot.{queue}.{index}"

    async def _read(self, queue: str, index: int) -> tuple[_Holder | None, str] | None:
        """Who holds the slot (``None``: unreadable) and the object's ETag; ``None`` if free."""
        key = self._key(queue, index)
        got = await self._objects.get_or_none_with_etag("read queue slot", key)
        if got is None:
            return None
        data, etag = got
        try:
            raw = self._codec.open(
                data,
                kind=Kind.LEASE,
                run_id=self._place(queue, index),
                slot=_SLOT,
                location=self._objects.location(key),
            )
            return _decoder.decode(raw), etag
        except (CorruptedDataError, EncryptionKeyError, msgspec.DecodeError):
            return None, etag  # another key's, or damaged: held, to be safe

    async def take(
        self,
        queue: str,
        slots: int,
        holder: str,
        *,
        now: float | None = None,
        until: float = 0.0,
    ) -> QueueSlot | None:
        """Take a free slot (or one whose worker's lease ran out, and whose ``until`` is
        not after ``now``); ``None`` if all are held."""
        await self._leases.keep_worker_alive(holder)  # the lease the slot names must be live
        worker = self._leases.workers.worker
        for index in range(slots):
            body = self._codec.seal(
                msgspec.msgpack.encode(_Holder(worker=worker, holder=holder, until=until)),
                kind=Kind.LEASE,
                run_id=self._place(queue, index),
                slot=_SLOT,
            )
            key = self._key(queue, index)
            try:
                await self._objects.put("take queue slot", key, body, token=uuid.uuid4().hex)
            except PreconditionFailed:
                current = await self._read(queue, index)
                if current is None:
                    continue  # released meanwhile: the next look takes it
                found, etag = current
                if found is None:
                    continue  # unreadable: held, to be safe
                if await self._leases.workers.expiry(found.worker) > time.time():
                    continue  # held by a live worker (this one included)
                if found.until and now is not None and found.until > now:
                    continue  # its worker is gone, its minute is not over: still counted
                try:
                    await self._objects.put(
                        "take queue slot", key, body, token=uuid.uuid4().hex, if_match=etag
                    )
                except PreconditionFailed:
                    continue  # another taker won
            return QueueSlot(queue=queue, index=index, holder=holder)
        return None

    async def release(self, slot: QueueSlot) -> None:
        """Delete the slot's object if it still names this store's worker.

        A timed slot's object is rewritten instead, naming no worker and
        keeping its ``until``: it counts until then, as if its worker had died.
        """
        self._bound.pop((slot.queue, slot.index), None)
        current = await self._read(slot.queue, slot.index)
        if current is None:
            return
        found, etag = current
        if found is None or found.worker != self._leases.workers.worker:
            return
        key = self._key(slot.queue, slot.index)
        if not found.until:
            await self._objects.delete("release queue slot", [key])
            return
        body = self._codec.seal(
            msgspec.msgpack.encode(_Holder(worker=_RELEASED, holder="", until=found.until)),
            kind=Kind.LEASE,
            run_id=self._place(slot.queue, slot.index),
            slot=_SLOT,
        )
        with contextlib.suppress(PreconditionFailed):  # taken over meanwhile: not ours
            await self._objects.put(
                "release queue slot", key, body, token=uuid.uuid4().hex, if_match=etag
            )
