"""The few operating-system calls FileStore makes, behind one small injectable class.

Tests swap :class:`OSFileSystem` for a simulated disk that loses every write not
yet fsynced at a chosen crash point (``tests/storage/file/simfs.py``), which is how
the store's fsync order is proven: SIGKILL keeps the page cache and cannot.
Every method blocks; FileStore calls them from worker threads.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import threading
import time
from typing import Literal

from actorflow._files import read_regular_file

__all__ = [
    "MAX_FILE_BYTES",
    "TEMP_PREFIX",
    "TRASH_PREFIX",
    "FileSystem",
    "OSFileSystem",
    "remake_folder",
    "remove_file",
    "write_atomic",
]

TEMP_PREFIX = ".tmp-"
"""Names of files being written; renamed into place once whole (see :func:`write_atomic`)."""

TRASH_PREFIX = ".trash-"
"""Names of folders renamed away to be deleted (a crash may leave one; ``prune`` removes it)."""

Mode = Literal["append", "create", "write"]

MAX_FILE_BYTES = 4 * 1024**3
"""The largest file :class:`OSFileSystem` reads by default: past any file actorflow writes."""


_held_locks: set[int] = set()
"""Descriptors of the flocks this process holds through :class:`OSFileSystem`."""
_held_locks_guard = threading.Lock()
"""Held while a lock's descriptor opens or closes, and across ``fork()``."""


def _drop_inherited_locks() -> None:
    # A flock belongs to the open file description, which a forked child shares:
    # while the child kept its copy, the lock would outlive a dead parent and make
    # it look alive. Closing the child's copy leaves the parent's lock as it is.
    for fd in _held_locks:
        try:
            os.close(fd)
        except OSError:
            pass
    _held_locks.clear()
    _held_locks_guard.release()  # taken by this thread before the fork


# The guard makes a descriptor's opening (or closing) and its noting one step
# that a fork in another thread never splits.
os.register_at_fork(
    before=_held_locks_guard.acquire,
    after_in_parent=_held_locks_guard.release,
    after_in_child=_drop_inherited_locks,
)


class FileSystem:
    """Blocking file primitives; the default implementation is :class:`OSFileSystem`."""

    def open(self, path: str, mode: Mode) -> int:
        """Open for writing, creating the file if absent (``create``: it must not exist).

        ``append`` writes go to the file's end; ``write`` ones where ``write_at``
        says, and a ``write`` handle can ``read_at`` too.
        """
        raise NotImplementedError

    def write(self, handle: int, data: bytes) -> None:
        """Write all of ``data`` at the handle's end."""
        raise NotImplementedError

    def write_at(self, handle: int, data: bytes, offset: int) -> None:
        """Write all of ``data`` at byte ``offset`` (a ``write``-mode handle)."""
        raise NotImplementedError

    def read_at(self, handle: int, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes from byte ``offset`` (a ``write``-mode handle reads too)."""
        raise NotImplementedError

    def fsync(self, handle: int) -> None:
        """Make the handle's file content durable."""
        raise NotImplementedError

    def sync_file(self, path: str) -> None:
        """Make an existing file's content durable. Raises FileNotFoundError.

        The default opens it for writing (after checking that it exists) and
        fsyncs it; a subclass should open it without creating it, as
        :class:`OSFileSystem` does, so that a file deleted at that instant is
        never created again empty.
        """
        if not self.exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        handle = self.open(path, "write")
        try:
            self.fsync(handle)
        finally:
            self.close(handle)

    def sync_data(self, handle: int) -> None:
        """Make content written within the file's current size durable.

        Cheaper than :meth:`fsync` where the size did not change (``fdatasync``):
        no metadata needs committing. Defaults to :meth:`fsync`.
        """
        self.fsync(handle)

    def truncate(self, handle: int, size: int) -> None:
        """Cut the file to ``size`` bytes."""
        raise NotImplementedError

    def close(self, handle: int) -> None:
        """Close a handle from :meth:`open`."""
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        """The whole file. Raises FileNotFoundError.

        Should raise ``UnreadableFileError`` for what is not a regular file (a
        FIFO must never block the read), as :class:`OSFileSystem` does.
        """
        raise NotImplementedError

    def size(self, path: str) -> int:
        """The file's size (a link's own, never its target's). Raises FileNotFoundError."""
        raise NotImplementedError

    def modified(self, path: str) -> float:
        """When the entry was last changed (seconds since the epoch). Raises FileNotFoundError.

        Only housekeeping reads it (``prune`` collects stale temp files). The
        default says "just now", so a file layer without it never collects one.
        """
        if not self.exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        return time.time()

    def exists(self, path: str) -> bool:
        """Whether a file or folder exists at ``path``."""
        raise NotImplementedError

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a folder; a link to one is not (deleting never follows links)."""
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        """Names in a folder, sorted; empty if the folder is absent."""
        raise NotImplementedError

    def mkdir(self, path: str) -> bool:
        """Create one folder; return False if it existed."""
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` with ``src``."""
        raise NotImplementedError

    def link(self, src: str, dst: str) -> bool:
        """Hard-link ``src`` as ``dst``; return False if ``dst`` exists."""
        raise NotImplementedError

    def unlink(self, path: str) -> None:
        """Remove a file if present."""
        raise NotImplementedError

    def rmdir(self, path: str) -> None:
        """Remove an empty folder if present."""
        raise NotImplementedError

    def fsync_dir(self, path: str) -> None:
        """Make a folder's entries (creations, renames, removals) durable."""
        raise NotImplementedError

    def try_lock(self, path: str) -> int | None:
        """Take an exclusive lock on ``path`` without waiting; None if someone holds it."""
        raise NotImplementedError

    def lock(self, path: str) -> int:
        """Take an exclusive lock on ``path``, waiting for it.

        The lock is on the file at ``path`` when the call returns: its holder
        may remove that file (:meth:`unlock_and_remove`), and a waiter then
        locks the file made there next, never the removed one.
        """
        raise NotImplementedError

    def unlock(self, handle: int) -> None:
        """Release a lock from :meth:`try_lock` or :meth:`lock`."""
        raise NotImplementedError

    def open_lockable(self, path: str) -> int:
        """Open (creating) ``path`` for reading and writing, to be locked by :meth:`flock`.

        The descriptor is closed in a forked child, like a held lock's; close
        it with :meth:`unlock`.

        .. versionadded:: 0.6
        """
        raise NotImplementedError

    def flock(self, handle: int, *, wait: bool) -> bool:
        """Lock an open descriptor exclusively; without ``wait``, False if someone holds it.

        .. versionadded:: 0.6
        """
        raise NotImplementedError

    def funlock(self, handle: int) -> None:
        """Release :meth:`flock`'s lock, keeping the descriptor open.

        .. versionadded:: 0.6
        """
        raise NotImplementedError

    def is_locked(self, path: str) -> bool:
        """Whether someone holds the lock on ``path``: tried, never kept.

        A reader asks this, so it must need no write access (a read-only
        store); the default takes and drops the lock, which a subclass may do
        without opening the file for writing, as :class:`OSFileSystem` does.
        """
        handle = self.try_lock(path)
        if handle is None:
            return True
        self.unlock(handle)
        return False

    def unlock_and_remove(self, handle: int, path: str) -> None:
        """Remove the lock file at ``path``, then release its lock (``handle``).

        For a lock file needed only while it is held: removed by its holder,
        under the lock, so nobody holds or waits for a file that is gone for long.

        .. versionadded:: 0.4
        """
        try:
            self.unlink(path)
        finally:
            self.unlock(handle)

    # --- composites, built only from the primitives above -----------------------

    def makedirs(self, path: str) -> None:
        """Create ``path`` and missing parents, each one durable in its parent."""
        parent = os.path.dirname(path)
        if parent and parent != path and not self.exists(parent):
            self.makedirs(parent)
        if self.mkdir(path) and parent:
            self.fsync_dir(parent)

    def remove_tree(self, path: str) -> None:
        """Remove a folder and everything under it.

        Never follows a link: a link is removed, never what it points at, so a
        link planted in the store cannot make pruning delete files outside it.
        """
        if not self.is_dir(path):
            self.unlink(path)  # a file, or a link (the link itself)
            return
        for name in self.listdir(path):
            self.remove_tree(os.path.join(path, name))
        self.rmdir(path)


def write_atomic(
    fs: FileSystem,
    path: str,
    data: bytes,
    *,
    exclusive: bool = False,
    durable: bool = True,
    sync_folder: bool = True,
) -> bool:
    """Write ``data`` to ``path`` so a crash leaves the old file or the new one.

    Temp file, write, fsync, rename (or link with ``exclusive``), folder fsync.
    Without ``durable`` both fsyncs are skipped: for files whose loss after a
    crash is harmless (readers must then accept a missing or torn file).
    Without ``sync_folder`` only the folder's is: a power loss may then bring
    back the old file, but never a torn new one.

    Returns:
        False only with ``exclusive`` when ``path`` already existed.
    """
    folder = os.path.dirname(path)
    temp = os.path.join(folder, f"{TEMP_PREFIX}{secrets.token_hex(8)}")
    handle = fs.open(temp, "create")
    try:
        try:
            fs.write(handle, data)
            if durable:
                fs.fsync(handle)
        finally:
            fs.close(handle)
    except BaseException:
        # a full disk or a failed fsync must not leave a partial file behind
        _unlink_quietly(fs, temp)
        raise
    try:
        if exclusive:
            created = fs.link(temp, path)
            fs.unlink(temp)
        else:
            fs.rename(temp, path)
            created = True
    except BaseException:
        _unlink_quietly(fs, temp)
        raise
    if durable and sync_folder:
        fs.fsync_dir(folder)
    return created


def _unlink_quietly(fs: FileSystem, path: str) -> None:
    # Cleanup on a failure path: the first error is the one the caller must see.
    try:
        fs.unlink(path)
    except OSError:
        pass


def remake_folder(fs: FileSystem, path: str) -> None:
    """Make a run's part folder (``log``, ``blobs``, ``snapshots``) again, durably.

    A power loss in the middle of creating a run can keep its manifest and
    lose a part's folder, since each folder entry reaches the disk on its
    own; the parts were empty then, so the run is whole without them. Only
    one level is made: a run folder that is gone (the run was deleted)
    stays gone (FileNotFoundError).
    """
    if fs.mkdir(path):
        fs.fsync_dir(os.path.dirname(path))


def remove_file(fs: FileSystem, path: str) -> int:
    """Remove a file if present; return the bytes it held (0 if it was absent)."""
    try:
        size = fs.size(path)
    except FileNotFoundError:
        return 0
    fs.unlink(path)
    return size


class OSFileSystem(FileSystem):
    """The real thing: ``os`` calls and ``fcntl.flock``.

    Args:
        max_file_bytes: the largest file :meth:`read` reads; a larger one is
            refused (``UnreadableFileError``), as is anything but a regular file.

    .. versionchanged:: 0.4
       ``read`` refuses what is not a regular file, and files over ``max_file_bytes``.
    """

    max_file_bytes: int = MAX_FILE_BYTES  # for subclasses whose __init__ skips ours

    def __init__(self, *, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.max_file_bytes = max_file_bytes

    def open(self, path: str, mode: Mode) -> int:
        flags = os.O_CREAT | os.O_CLOEXEC
        if mode == "append":
            flags |= os.O_WRONLY | os.O_APPEND
        elif mode == "create":
            flags |= os.O_WRONLY | os.O_EXCL
        else:
            flags |= os.O_RDWR
        return os.open(path, flags, 0o644)

    def write(self, handle: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view) :]

    def write_at(self, handle: int, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            done = os.pwrite(handle, view, offset)
            view, offset = view[done:], offset + done

    def read_at(self, handle: int, size: int, offset: int) -> bytes:
        return os.pread(handle, size, offset)

    def fsync(self, handle: int) -> None:
        os.fsync(handle)

    def sync_data(self, handle: int) -> None:
        os.fdatasync(handle)

    def sync_file(self, path: str) -> None:
        # never waits in open() for a writer, should a FIFO have been put there
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, handle: int, size: int) -> None:
        os.ftruncate(handle, size)

    def close(self, handle: int) -> None:
        os.close(handle)

    def read(self, path: str) -> bytes:
        return read_regular_file(path, limit=self.max_file_bytes)

    def size(self, path: str) -> int:
        return os.lstat(path).st_size

    def modified(self, path: str) -> float:
        return os.lstat(path).st_mtime

    def is_dir(self, path: str) -> bool:
        # lstat, not os.path.isdir: a link to a folder is removed, never entered
        try:
            return stat.S_ISDIR(os.lstat(path).st_mode)
        except FileNotFoundError:
            return False

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def mkdir(self, path: str) -> bool:
        try:
            os.mkdir(path)
        except FileExistsError:
            return False
        return True

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def link(self, src: str, dst: str) -> bool:
        try:
            os.link(src, dst)
        except FileExistsError:
            return False
        return True

    def unlink(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def rmdir(self, path: str) -> None:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # Locks never pass to another process: O_CLOEXEC keeps them from an exec'd
    # program, and a forked child closes its copies (_drop_inherited_locks).

    # A lock file may be removed by its holder (see FileSystem.lock), so a lock
    # taken is kept only if its file is still the one at ``path``; else the
    # file now there is locked. That is the classic pattern for flocks on
    # files that get unlinked: whoever holds the file at ``path`` holds the lock.

    def try_lock(self, path: str) -> int | None:
        # flock, not lockf: lockf lets this process take its own lock again and
        # drops every lock of the file when any descriptor of it closes.
        while True:
            fd = self._open_lock(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if self._still_at(fd, path):
                    return fd
            except OSError as exc:
                self.unlock(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return None
                raise
            except BaseException:
                self.unlock(fd)
                raise
            self.unlock(fd)

    def lock(self, path: str) -> int:
        while True:
            fd = self._open_lock(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if self._still_at(fd, path):
                    return fd
            except BaseException:
                self.unlock(fd)
                raise
            self.unlock(fd)

    @staticmethod
    def _still_at(fd: int, path: str) -> bool:
        try:
            there = os.stat(path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)

    def unlock(self, handle: int) -> None:
        with _held_locks_guard:
            _held_locks.discard(handle)
            os.close(handle)  # closing the only descriptor drops the flock

    def open_lockable(self, path: str) -> int:
        return self._open_lock(path)

    def flock(self, handle: int, *, wait: bool) -> bool:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if not wait and exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def funlock(self, handle: int) -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)

    def is_locked(self, path: str) -> bool:
        # flock needs no write access to the file: a read-only store is probed too
        try:
            fd = self._open_lock(path, os.O_RDONLY)
        except FileNotFoundError:
            return False  # its first taker makes the lock file: never taken
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            raise
        finally:
            self.unlock(fd)
        return False

    @staticmethod
    def _open_lock(path: str, flags: int = os.O_RDWR | os.O_CREAT) -> int:
        with _held_locks_guard:
            fd = os.open(path, flags | os.O_CLOEXEC, 0o644)
            _held_locks.add(fd)
        return fd
