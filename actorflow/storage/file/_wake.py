"""A file store's inbox watch: a FIFO in the run's folder that posters write a byte to.

Layout, inside a run's folder::

    inbox.wake      a FIFO (named pipe), there while a watcher lives (or left by one
                    that was killed); made on the first watch

A watcher makes a new FIFO under a temp name (``.tmp-*``, which ``prune``
sweeps if a crash leaves one), opens it for reading *and* writing without
blocking (one descriptor: being a writer itself, it never reads end-of-file
when posters come and go, and holding one descriptor rather than a read end
and a write end keeps a waiting run's descriptors few; Linux defines such an
open of a FIFO), and renames it to ``inbox.wake``: a FIFO left there by a watcher that
died, or by another watcher of the run, is replaced, and only the newest
watcher is woken (a run has one live owner). It waits with
``anyio.wait_readable`` and drains the bytes. On leaving, it closes its
descriptor and removes ``inbox.wake`` if that is still its own FIFO (same inode).

A post, once its entry is durable, opens ``inbox.wake`` for writing without
blocking and writes one byte: no reader (``ENXIO``: nobody watches, or the
FIFO is a dead watcher's), no FIFO (``ENOENT``) and a full pipe (``EAGAIN``:
a wake is pending anyway) are all fine, and a post never waits for a reader.
Posts from any process on the machine wake the watcher; nothing polls.

Where a FIFO cannot be made (a file layer that is not the operating
system's, a file system without FIFOs), the watch polls instead, every
:data:`POLL_WITHOUT_FIFO` seconds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import TYPE_CHECKING, Final

import anyio
import anyio.lowlevel

from actorflow._log import get_logger
from actorflow.storage._inbox_watch import PollingWatch
from actorflow.storage.file._fs import TEMP_PREFIX

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from actorflow.storage._inbox_watch import InboxWatch
    from actorflow.storage.file._layout import RunFolders

__all__ = [
    "POLL_WITHOUT_FIFO",
    "WAKE",
    "FifoWatch",
    "fifo_or_polling",
    "make_fifo",
    "open_fifo",
    "poke_fifo",
    "wake",
    "watch",
]

_log = get_logger(__name__)

WAKE: Final = "inbox.wake"
"""The FIFO's name in a run's folder."""

POLL_WITHOUT_FIFO: Final = 0.2
"""Seconds between a watch's returns where no FIFO can be made."""

_NOBODY = frozenset({errno.ENXIO, errno.ENOENT, errno.EAGAIN, errno.ENOTDIR, errno.ELOOP})
"""Errors of a wake that mean nobody is there to wake, or a wake is pending already."""


def wake(folders: RunFolders, run_id: str) -> None:
    """Write one byte to the run's FIFO if a watcher reads it. Never waits; never raises.

    Called after a post's entry is durable. An error other than "nobody is
    there" is logged (``inbox_wake_failed``): the entry is stored, and failing
    the post would not wake the watcher either.
    """
    poke_fifo(folders.run(run_id, WAKE), run_id)


def poke_fifo(path: str, run_id: str) -> None:
    """Write one byte to the FIFO at ``path`` if a watcher reads it. Never waits; never raises.

    Shared with the SQLite store, whose FIFOs sit beside its database.
    """
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


class FifoWatch:
    """An open watch: one descriptor, open for reading and writing, of a FIFO this process made."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        info = os.fstat(fd)
        self._identity = (info.st_dev, info.st_ino)
        self._closed = False

    async def changed(self) -> None:
        """See :meth:`InboxWatch.changed`: waits for a byte in the FIFO, then drains it.

        Raises:
            anyio.ClosedResourceError: the watch was closed.
        """
        if self._drain():  # bytes of posts made while nobody waited
            await anyio.lowlevel.checkpoint()
            return
        while True:
            await anyio.wait_readable(self._fd)
            if self._drain():
                return

    def _drain(self) -> bool:
        if self._closed:
            raise anyio.ClosedResourceError
        got = False
        while True:
            try:
                data = os.read(self._fd, 4096)
            except BlockingIOError:
                return got
            got = got or bool(data)
            if not data:  # no end-of-file while we hold a write end; never spin on one
                return got

    def close(self) -> None:
        """Close the FIFO (waking a waiting ``changed`` with ``ClosedResourceError``)."""
        if self._closed:
            return
        self._closed = True
        anyio.notify_closing(self._fd)
        os.close(self._fd)

    def remove(self) -> None:
        """Remove ``inbox.wake`` if it is still this watch's FIFO. Blocks; never raises."""
        try:
            info = os.lstat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:
                os.unlink(self.path)
        except OSError:
            pass  # gone with the run, or not ours to remove: a leftover FIFO is harmless


def open_fifo(folders: RunFolders, run_id: str) -> FifoWatch | None:
    """Make and open a new FIFO as the run's ``inbox.wake``; None where none can be made.

    Blocks: call it from a worker thread.

    Raises:
        RunNotFoundError: no such run.
    """
    folders.require(run_id)
    temp = folders.run(run_id, f"{TEMP_PREFIX}{secrets.token_hex(8)}")
    watch = make_fifo(folders.run(run_id, WAKE), temp, run_id)
    if watch is None:
        folders.require(run_id)  # deleted meanwhile? else FIFOs cannot be made here
    return watch


def make_fifo(path: str, temp: str, run_id: str) -> FifoWatch | None:
    """Make a FIFO at ``temp``, open it and rename it to ``path``; None where none can be made.

    Shared with the SQLite store. Blocks.
    """
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


@contextlib.asynccontextmanager
async def watch(folders: RunFolders, run_id: str) -> AsyncIterator[InboxWatch]:
    """The file store's ``watch_inbox``; see the module docstring.

    Raises:
        RunNotFoundError: no such run.
        StorageError: the operating system refused to make or open the FIFO.
    """
    fifo = await folders.call("watch inbox", open_fifo, folders, run_id)
    async with fifo_or_polling(fifo, lambda f: folders.call("stop watching inbox", f.remove)):
        yield fifo if fifo is not None else PollingWatch(POLL_WITHOUT_FIFO)


@contextlib.asynccontextmanager
async def fifo_or_polling(
    fifo: FifoWatch | None, remove: Callable[[FifoWatch], Awaitable[None]]
) -> AsyncIterator[None]:
    """Inside: ``fifo`` is the run's wake-up (or, None, a polling watch serves); on leaving,
    it is closed and removed with ``remove``, through a cancellation."""
    if fifo is None:
        yield
        return
    try:
        yield
    finally:
        fifo.close()
        with anyio.CancelScope(shield=True):
            await remove(fifo)
