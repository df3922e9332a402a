"""A PostgresStore's queue and limit slots: session advisory locks on its lock connection.

Slot ``k`` of queue ``q`` (or of limit key ``q``) is one advisory lock: the
server frees it when its holder's session ends, so a killed worker's slots
come free at once. A timed slot (a queue's ``per_minute``) also keeps, in
``af_queue_ends``, when its minute ends: a taker that gets the lock of a
holder that died, or gave it back, within its minute leaves it until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from actorflow.storage._capabilities import QueueSlot
from actorflow.storage.postgres._locks import lock_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage.postgres._db import Connection
    from actorflow.storage.postgres._locks import Locks

__all__ = ["SlotLocks"]


class SlotLocks:
    """The slots this store takes, through its :class:`Locks`.

    Args:
        locks: the store's lock connection and the keys it holds.
        schema: the store's schema (lock keys are per schema).
        started: called before a slot is taken (the store starts its listener,
            whose ticks check the lock connection that holds the slots).
    """

    def __init__(self, locks: Locks, schema: str, started: Callable[[], None]) -> None:
        self._locks = locks
        self._schema = schema
        self._started = started

    async def take_limit(self, key: str, slots: int) -> int | None:
        """Hold one of ``key``'s ``slots`` locks: its lock key, or None if all are held."""
        locks = self._locks

        def take(conn: Connection) -> int | None:
            for index in range(slots):
                held = lock_key(self._schema, "limit", key, str(index))
                if locks.try_lock(conn, held):
                    return held
            return None

        self._started()
        handle: int | None = await anyio.to_thread.run_sync(locks.call, "take limit slot", take)
        return handle

    def release_limit(self, handle: int) -> None:
        """Give a limit slot back without waiting."""
        self._locks.unlock_soon(handle)

    async def take_queue(
        self, queue: str, slots: int, holder: str, *, timed: tuple[float, float] | None = None
    ) -> QueueSlot | None:
        """Hold the first free slot of ``queue``; None if all ``slots`` are held.

        ``timed`` is ``(now, until)``: a slot whose last minute ends after
        ``now`` is passed over, and the one taken is kept until ``until``.
        """
        locks = self._locks

        def take(conn: Connection) -> int | None:
            for index in range(slots):
                key = lock_key(self._schema, "queue", queue, str(index))
                if not locks.try_lock(conn, key):
                    continue
                if timed is None:
                    return index
                now, until = timed
                last = conn.execute(
                    "SELECT until FROM af_queue_ends WHERE queue = %s AND idx = %s",
                    (queue, index),
                ).fetchone()
                if last is not None and float(last[0]) > now:
                    locks.unlock(conn, key)  # its holder's minute is not over: still counted
                    continue
                conn.execute(
                    "INSERT INTO af_queue_ends (queue, idx, until) VALUES (%s, %s, %s) "
                    "ON CONFLICT (queue, idx) DO UPDATE SET until = EXCLUDED.until",
                    (queue, index, until),
                )
                return index
            return None

        self._started()
        index: int | None = await anyio.to_thread.run_sync(locks.call, "take queue slot", take)
        return None if index is None else QueueSlot(queue=queue, index=index, holder=holder)

    async def release_queue(self, slot: QueueSlot) -> None:
        """Give a queue slot back, if this store holds it (even when cancelled)."""
        key = lock_key(self._schema, "queue", slot.queue, str(slot.index))
        locks = self._locks
        if not locks.holds(key):
            return
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(
                locks.call, "release queue slot", lambda conn: locks.unlock(conn, key)
            )
