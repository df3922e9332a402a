"""A file store's queue slots: one ``flock`` per slot in ``.queues/``.

Slot ``k`` of queue ``q`` is the lock on ``.queues/q.k``: the operating
system ends it with its holder's process, so a worker that dies frees its
slots. A timed slot (a queue's ``per_minute``) also writes, under its lock,
the time it ends (eight bytes, a machine double): a taker that locks the
file of a holder that died reads it, and leaves the slot alone until then.
The folder's name starts with a dot, so it is never read as a run.
Every method blocks: the store calls them from worker threads.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import TYPE_CHECKING

from actorflow.storage._capabilities import QueueSlot

if TYPE_CHECKING:
    from actorflow.storage.file._fs import FileSystem

__all__ = ["QUEUE_FOLDER", "SlotLocks"]

QUEUE_FOLDER = ".queues"

_UNTIL = struct.Struct("=d")


class SlotLocks:
    """The slot locks under ``root/.queues`` this store holds."""

    def __init__(self, fs: FileSystem, root: str) -> None:
        self._fs = fs
        self._folder = os.path.join(root, QUEUE_FOLDER)
        self._held: dict[tuple[str, int], int] = {}
        self._mutex = threading.Lock()

    def take(self, queue: str, slots: int, holder: str) -> QueueSlot | None:
        """Lock the first free slot of ``queue``; ``None`` if all ``slots`` are held."""
        self._fs.makedirs(self._folder)
        for index in range(slots):
            with self._mutex:
                if (queue, index) in self._held:
                    continue  # held by this store already
                handle = self._fs.try_lock(os.path.join(self._folder, f"{queue}.{index}"))
                if handle is not None:
                    self._held[(queue, index)] = handle
                    return QueueSlot(queue=queue, index=index, holder=holder)
        return None

    def take_timed(
        self, queue: str, slots: int, holder: str, now: float, until: float
    ) -> QueueSlot | None:
        """Lock the first free slot of ``queue`` whose last ``until`` is not after ``now``."""
        fs = self._fs
        fs.makedirs(self._folder)
        for index in range(slots):
            with self._mutex:
                if (queue, index) in self._held:
                    continue  # held by this store already
                handle = fs.try_lock(os.path.join(self._folder, f"{queue}.{index}"))
                if handle is None:
                    continue
                last = fs.read_at(handle, _UNTIL.size, 0)
                if len(last) == _UNTIL.size and _UNTIL.unpack(last)[0] > now:
                    fs.unlock(handle)  # its holder died within its minute: still counted
                    continue
                fs.write_at(handle, _UNTIL.pack(until), 0)
                self._held[(queue, index)] = handle
                return QueueSlot(queue=queue, index=index, holder=holder)
        return None

    def release(self, slot: QueueSlot) -> None:
        """Unlock the slot if this store holds it."""
        with self._mutex:
            handle = self._held.pop((slot.queue, slot.index), None)
        if handle is not None:
            self._fs.unlock(handle)

    def forget(self) -> None:
        """Hold nothing, without unlocking: in a forked child, whose locks are its parent's."""
        self._held = {}
        self._mutex = threading.Lock()

    def release_all(self) -> None:
        """Unlock every slot (the store closes)."""
        with self._mutex:
            held, self._held = self._held, {}
        for handle in held.values():
            self._fs.unlock(handle)
