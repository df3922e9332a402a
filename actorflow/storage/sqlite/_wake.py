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
import errno
import os
import secrets
import stat
from typing import TYPE_CHECKING

from actorflow._log import get_logger
from actorflow.storage.file._wake import POLL_WITHOUT_FIFO, FifoWatch

if TYPE_CHECKING:
    from actorflow.storage.sqlite._locks import LockFolder

__all__ = ["POLL_WITHOUT_FIFO", "open_fifo", "poke"]

_log = get_logger(__name__)

_NOBODY = frozenset({errno.ENXIO, errno.ENOENT, errno.EAGAIN, errno.ENOTDIR, errno.ELOOP})


def poke(locks: LockFolder, run_id: str) -> None:
    """Write one byte to the run's FIFO if a watcher reads it. Never waits; never raises."""
    path = locks.path("wake", run_id)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno not in _NOBODY:
            _log.warning("inbox_wake_failed", run_id=run_id, location=path, error=str(exc))
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # never write into a file put there
            os.write(fd, b"\0")
    except OSError as exc:
        if exc.errno not in _NOBODY:
            _log.warning("inbox_wake_failed", run_id=run_id, location=path, error=str(exc))
    finally:
        os.close(fd)


def open_fifo(locks: LockFolder, run_id: str) -> FifoWatch | None:
    """Make and open a new FIFO as the run's wake-up; None where none can be made. Blocks."""
    path = locks.path("wake", run_id)
    temp = locks.path("wake", f".tmp-{secrets.token_hex(8)}")
    try:
        os.mkfifo(temp, 0o600)
    except OSError as exc:
        _log.info("inbox_watch_polling", run_id=run_id, location=temp, error=str(exc))
        return None
    try:
        fd = os.open(temp, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            watch = FifoWatch(path, fd)
            os.rename(temp, path)
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return watch
