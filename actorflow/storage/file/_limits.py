"""A file store's shared rate budgets (``SharedLimits``): one small file per limit key.

``limits/<key>.slot-<n>`` are its concurrency slots: a slot is the flock on
its file, which the operating system drops with a process that dies holding
it. ``limits/<key>.budget`` holds the key's sliding minute (request start
times and token spends) as one record, a header and then the times as
machine doubles (the file never leaves its machine), read and rewritten in
place under the flock of the file itself, which each store keeps open: a
take is four system calls (flock, pread, pwrite, unlock), so the processes of
one machine sharing the store take from one budget cheaply. A process
killed between two calls leaves the record whole (a signal does not split a
``pwrite``); a torn record (a power loss) or a foreign one starts the budget
afresh. The rule is ``take_window``'s, applied to the arrays as read: no
object per request. No fsync: a budget is about the last minute, and a power
loss forgets it.

Nothing here waits unless another process holds the lock: the store calls
``try_take``/``try_spend``/``take_slot`` on its event loop's thread, and
``take``/``spend`` from a worker thread only when the lock is held elsewhere.
"""

from __future__ import annotations

import array
import bisect
import os
import struct
import threading
from typing import TYPE_CHECKING

from actorflow.storage._windows import LIMIT_WINDOW

if TYPE_CHECKING:
    from actorflow.storage.file._fs import FileSystem

__all__ = ["LimitFiles"]


_MAGIC = 0x61664C31  # "afL1": an actorflow budget record, version 1
_HEADER = struct.Struct("=III")  # magic, request starts, token spend numbers (two per spend)
_FIRST_READ = 8192  # one pread reads a budget of about a thousand requests whole


class LimitFiles:
    """The budget files under ``<store>/limits``.

    ``take``, ``spend`` wait for another process's lock (call them from a
    worker thread); ``try_take``, ``try_spend``, ``take_slot`` and
    ``release_slot`` never wait.
    """

    def __init__(self, fs: FileSystem, root: str) -> None:
        self._fs = fs
        self._root = root
        self._ready = False
        # flocks on one descriptor do not exclude each other: one thread at a time
        self._mutex = threading.Lock()
        self._budgets: dict[str, int] = {}  # key -> its budget file, kept open
        self._pid = os.getpid()

    def take(
        self, key: str, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> tuple[float, float]:
        """Take one request from ``key``'s window at ``now``: 0.0, or seconds to wait.

        And the time the window counts it at: ``now``, or its newest start when
        that is later (see ``take_window``).
        """
        with self._mutex:
            fd = self._budget(key)
            self._fs.flock(fd, wait=True)
            try:
                return self._take(fd, per_minute, tokens_per_minute, now)
            finally:
                self._fs.funlock(fd)

    def try_take(
        self, key: str, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> tuple[float, float] | None:
        """``take`` if nobody holds the budget's lock now; ``None`` (nothing taken) if one does."""
        if not self._mutex.acquire(blocking=False):
            return None
        try:
            fd = self._budget(key)
            if not self._fs.flock(fd, wait=False):
                return None
            try:
                return self._take(fd, per_minute, tokens_per_minute, now)
            finally:
                self._fs.funlock(fd)
        finally:
            self._mutex.release()

    def spend(self, key: str, tokens: float, now: float) -> None:
        """Count ``tokens`` spent at ``now`` in ``key``'s window."""
        with self._mutex:
            fd = self._budget(key)
            self._fs.flock(fd, wait=True)
            try:
                self._spend(fd, tokens, now)
            finally:
                self._fs.funlock(fd)

    def try_spend(self, key: str, tokens: float, now: float) -> bool:
        """``spend`` if nobody holds the budget's lock now; whether it did."""
        if not self._mutex.acquire(blocking=False):
            return False
        try:
            fd = self._budget(key)
            if not self._fs.flock(fd, wait=False):
                return False
            try:
                self._spend(fd, tokens, now)
            finally:
                self._fs.funlock(fd)
            return True
        finally:
            self._mutex.release()

    def take_slot(self, key: str, slots: int) -> int | None:
        """Hold the flock of one of ``key``'s slot files: its handle, or None if all are held."""
        path = self._path(key)
        for n in range(slots):
            handle = self._fs.try_lock(f"{path}.slot-{n}")
            if handle is not None:
                return handle
        return None

    def release_slot(self, handle: int) -> None:
        """Drop a slot's flock (no wait: it closes a descriptor)."""
        self._fs.unlock(handle)

    def close(self) -> None:
        """Close the budget files (the store closes)."""
        with self._mutex:
            budgets, self._budgets = self._budgets, {}
            if self._pid == os.getpid():
                for fd in budgets.values():
                    self._fs.unlock(fd)

    # --- inside ---------------------------------------------------------------------

    def _take(
        self, fd: int, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> tuple[float, float]:
        # take_window's rule, on the record's arrays as they are (no object per entry)
        starts, tokens = self._read(fd)
        if starts and now < starts[-1]:
            now = starts[-1]
        horizon = now - LIMIT_WINDOW
        first = bisect.bisect_right(starts, horizon)  # starts are in order (see take_window)
        spent = 0
        while spent < len(tokens) and tokens[spent] <= horizon:
            spent += 2
        wait = 0.0
        live = len(starts) - first
        if per_minute is not None and live >= per_minute:
            wait = starts[len(starts) - per_minute] + LIMIT_WINDOW - now
        if (
            tokens_per_minute is not None
            and spent < len(tokens)
            and sum(tokens[spent + 1 :: 2]) >= tokens_per_minute
        ):
            wait = max(wait, tokens[spent] + LIMIT_WINDOW - now)
        if wait <= 0:
            starts.append(now)
        elif not first and not spent:
            return wait, now  # nothing taken, nothing dropped: nothing to write
        self._write(fd, starts[first:], tokens[spent:])
        return (0.0 if wait <= 0 else wait), now

    def _spend(self, fd: int, tokens: float, now: float) -> None:
        starts, spends = self._read(fd)
        spends.extend((now, tokens))
        self._write(fd, starts, spends)

    def _budget(self, key: str) -> int:
        """The open descriptor of ``key``'s budget file (opened again in a forked child)."""
        if self._pid != os.getpid():
            # the parent's descriptors were closed in this child as it forked (see _fs)
            self._budgets, self._pid = {}, os.getpid()
        fd = self._budgets.get(key)
        if fd is None:
            fd = self._budgets[key] = self._fs.open_lockable(self._path(key) + ".budget")
        return fd

    def _read(self, fd: int) -> tuple[array.array[float], array.array[float]]:
        """The record's request starts and its token spends (time, tokens, time, ...)."""
        fs = self._fs
        starts: array.array[float] = array.array("d")
        tokens: array.array[float] = array.array("d")
        data = fs.read_at(fd, _FIRST_READ, 0)
        if len(data) < _HEADER.size:
            return starts, tokens  # new
        magic, n_starts, n_tokens = _HEADER.unpack_from(data)
        end = _HEADER.size + 8 * (n_starts + n_tokens)
        if magic != _MAGIC or n_tokens % 2:
            return starts, tokens  # not ours, or damaged: the budget starts afresh
        if end > len(data):
            data += fs.read_at(fd, end - len(data), len(data))
            if end > len(data):
                return starts, tokens  # torn by a power loss: the budget starts afresh
        view = memoryview(data)
        middle = _HEADER.size + 8 * n_starts
        starts.frombytes(view[_HEADER.size : middle])
        tokens.frombytes(view[middle:end])
        return starts, tokens

    def _write(self, fd: int, starts: array.array[float], tokens: array.array[float]) -> None:
        # in place: what lies past the record (a longer one before) is never read
        record = (
            _HEADER.pack(_MAGIC, len(starts), len(tokens)) + starts.tobytes() + tokens.tobytes()
        )
        self._fs.write_at(fd, record, 0)

    def _path(self, key: str) -> str:
        if not self._ready:
            self._fs.makedirs(self._root)
            self._ready = True
        return os.path.join(self._root, key)
