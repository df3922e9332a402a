"""A file store's shared rate budgets (``SharedLimits``): one small file per limit key.

``limits/<key>.slot-<n>`` are its concurrency slots: a slot is the flock
on its file, which the operating system drops with a process that dies
holding it. ``limits/<key>`` holds the key's sliding minute (request start times and
token spends); every reader and writer holds the flock of ``limits/<key>.lock``
while it reads, decides and writes, so the processes of one machine sharing
the store take from one budget. A new window is written beside the old one and
renamed over it: a process killed halfway leaves the old window whole. No
fsync: a budget is about the last minute, and a power loss forgets it.
"""

from __future__ import annotations

import collections
import os
from typing import TYPE_CHECKING

import msgspec

from actorflow.storage._windows import take_window

if TYPE_CHECKING:
    from actorflow.storage.file._fs import FileSystem

__all__ = ["LimitFiles"]


class _Window(msgspec.Struct, array_like=True):
    starts: list[float] = []
    tokens: list[tuple[float, float]] = []


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_Window).decode


class LimitFiles:
    """The budget files under ``<store>/limits``. Methods block: call them from a worker thread."""

    def __init__(self, fs: FileSystem, root: str) -> None:
        self._fs = fs
        self._root = root
        self._ready = False

    def take(
        self, key: str, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> tuple[float, float]:
        """Take one request from ``key``'s window at ``now``: 0.0, or seconds to wait.

        And the time the window counts it at: ``now``, or its newest start when
        that is later (see ``take_window``).
        """
        path = self._path(key)
        handle = self._fs.lock(path + ".lock")
        try:
            window = self._read(path)
            starts = collections.deque(window.starts)
            tokens = collections.deque(window.tokens)
            before = len(starts), len(tokens)
            wait, _ = take_window(
                starts,
                tokens,
                sum(n for _, n in tokens),
                per_minute=per_minute,
                tokens_per_minute=tokens_per_minute,
                now=now,
            )
            if (len(starts), len(tokens)) != before or wait <= 0:
                self._write(path, _Window(list(starts), list(tokens)))
            return wait, max(now, starts[-1]) if starts else now
        finally:
            self._fs.unlock(handle)

    def spend(self, key: str, tokens: float, now: float) -> None:
        """Count ``tokens`` spent at ``now`` in ``key``'s window."""
        path = self._path(key)
        handle = self._fs.lock(path + ".lock")
        try:
            window = self._read(path)
            window.tokens.append((now, tokens))
            self._write(path, window)
        finally:
            self._fs.unlock(handle)

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

    def _path(self, key: str) -> str:
        if not self._ready:
            self._fs.makedirs(self._root)
            self._ready = True
        return os.path.join(self._root, key)

    def _read(self, path: str) -> _Window:
        try:
            data = self._fs.read(path)
        except FileNotFoundError:
            return _Window()
        try:
            return _decode(data)
        except msgspec.DecodeError:
            return _Window()  # not ours, or damaged: the budget starts afresh

    def _write(self, path: str, window: _Window) -> None:
        fs = self._fs
        temp = path + ".new"
        handle = fs.open(temp, "write")
        try:
            fs.truncate(handle, 0)
            fs.write_at(handle, _encode(window), 0)
        finally:
            fs.close(handle)
        fs.rename(temp, path)
