"""A SqliteStore's inbox watch: the file store's FIFO wake-ups, beside the database.

A run's watcher (its live owner) makes ``<file>-locks/wake/<run id>``, a
FIFO, and waits for a byte on it; a post, once its commit is done, writes
one byte to it without blocking, from whichever process on the machine
posted. Nothing polls: a signal from another process wakes the run at once.
The FIFO's handling (made under a temp name and renamed into place, one
descriptor open for reading and writing, removed on leaving) is the file
store's: see :mod:`actorflow.storage.file._wake`. Where no FIFO can be made,
the watch returns every :data:`~actorflow.storage.file._wake.POLL_WITHOUT_FIFO`
seconds instead.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import TYPE_CHECKING

from actorflow.storage._inbox_watch import PollingWatch
from actorflow.storage.file._threads import run_in_thread
from actorflow.storage.file._wake import (
    POLL_WITHOUT_FIFO,
    FifoWatch,
    fifo_or_polling,
    make_fifo,
    poke_fifo,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actorflow.storage._inbox_watch import InboxWatch
    from actorflow.storage.sqlite._locks import LockFolder

__all__ = ["POLL_WITHOUT_FIFO", "open_fifo", "poke", "watch"]


def poke(locks: LockFolder, run_id: str) -> None:
    """Write one byte to the run's FIFO if a watcher reads it. Never waits; never raises."""
    poke_fifo(locks.path("wake", run_id), run_id)


def open_fifo(locks: LockFolder, run_id: str) -> FifoWatch | None:
    """Make and open a new FIFO as the run's wake-up; None where none can be made. Blocks."""
    temp = locks.path("wake", f".tmp-{secrets.token_hex(8)}")
    return make_fifo(locks.path("wake", run_id), temp, run_id)


@contextlib.asynccontextmanager
async def watch(locks: LockFolder, run_id: str) -> AsyncIterator[InboxWatch]:
    """The run's FIFO while inside, removed on leaving; a polling watch where none can be made.

    Raises:
        StoreReadOnlyError: this process may not make the FIFO.
        StorageError: the operating system refused otherwise.
    """
    fifo = await locks.call("watch inbox", open_fifo, locks, run_id)
    async with fifo_or_polling(fifo, lambda f: run_in_thread(f.remove)):
        yield fifo if fifo is not None else PollingWatch(POLL_WITHOUT_FIFO)
