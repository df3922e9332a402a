"""A simulated disk for power-loss tests: it forgets whatever was not fsynced.

File contents become durable with ``fsync`` of the file; folder entries
(creations, renames, removals) with ``fsync_dir`` of the folder, as on ext4 and
XFS. At the seeded crash point every call fails from then on (the machine is
off); :meth:`SimFS.after_power_loss` then returns the disk as it would come back:
synced entries and synced contents only. With ``tear`` a file keeps its
unsynced changes up to a random byte (appended, or written over zeros set
aside), and each unsynced folder change independently survives or not, which
models writes reaching the disk out of order.
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field

from actorflow.storage import FileSystem

__all__ = ["PowerLoss", "SimFS"]


class PowerLoss(OSError):
    """The simulated machine lost power; every later call fails too."""


@dataclass(eq=False)
class _Inode:
    data: bytearray = field(default_factory=bytearray)
    synced: bytes = b""


_DIR = "<dir>"


def _torn(synced: bytes, current: bytes, rng: random.Random) -> bytes:
    """What of a file's unsynced writes reached the disk: its changes up to a random byte.

    Appends and writes over zeros set aside alike: the bytes from the first
    one that differs from the synced content reach the disk in order, up to
    a random point; the rest is as last synced.
    """
    if synced == current:
        return synced
    low, high = 0, min(len(synced), len(current))
    while low < high:  # the first byte that differs, by halving (slices compare in C)
        mid = (low + high) // 2
        if synced[: mid + 1] == current[: mid + 1]:
            low = mid + 1
        else:
            high = mid
    same = low
    if same == len(current):
        return synced
    cut = rng.randint(same, len(current))
    return current[:cut] + synced[cut:]


class SimFS(FileSystem):
    """An in-memory file system that can crash after ``crash_at`` mutating calls."""

    def __init__(self, *, crash_at: int | None = None) -> None:
        self.crash_at = crash_at
        self.ops = 0
        self.crashed = False
        self._lock = threading.Lock()
        self.dirs: dict[str, dict[str, _Inode | str]] = {"/": {}}
        self.synced_dirs: dict[str, dict[str, _Inode | str]] = {"/": {}}
        self._handles: dict[int, _Inode] = {}
        self._locks: dict[int, str] = {}
        self._next = 3

    # --- crash machinery -----------------------------------------------------------

    def _step(self) -> None:
        if self.crashed:
            raise PowerLoss("simulated power loss")
        self.ops += 1
        if self.crash_at is not None and self.ops >= self.crash_at:
            self.crashed = True
            raise PowerLoss("simulated power loss")

    def after_power_loss(self, *, tear: bool = False, seed: int = 0) -> SimFS:
        """The disk as it comes back after the crash."""
        rng = random.Random(seed)
        fresh = SimFS()
        copies: dict[int, _Inode] = {}

        def survive(inode: _Inode) -> _Inode:
            copy = copies.get(id(inode))
            if copy is None:
                kept = inode.synced
                if tear:
                    kept = _torn(kept, bytes(inode.data), rng)
                copy = copies[id(inode)] = _Inode(bytearray(kept), kept)
            return copy

        def walk(path: str) -> None:
            entries = dict(self.synced_dirs.get(path, {}))
            if tear:
                for name, node in self.dirs.get(path, {}).items():
                    if entries.get(name) is not node and rng.random() < 0.5:
                        entries[name] = node
                for name in list(entries):
                    if name not in self.dirs.get(path, {}) and rng.random() < 0.5:
                        del entries[name]
            fresh.dirs[path] = {}
            for name, node in entries.items():
                child = os.path.join(path, name)
                if node == _DIR:
                    if child in self.dirs:
                        fresh.dirs[path][name] = _DIR
                        walk(child)
                else:
                    assert isinstance(node, _Inode)
                    fresh.dirs[path][name] = survive(node)
            fresh.synced_dirs[path] = dict(fresh.dirs[path])

        walk("/")
        return fresh

    # --- lookup ----------------------------------------------------------------------

    def _parent(self, path: str) -> tuple[dict[str, _Inode | str], str]:
        parent, name = os.path.split(path)
        try:
            return self.dirs[parent], name
        except KeyError:
            raise FileNotFoundError(2, "No such file or directory", path) from None

    def _inode(self, path: str) -> _Inode:
        entries, name = self._parent(path)
        node = entries.get(name)
        if node is None:
            raise FileNotFoundError(2, "No such file or directory", path)
        if not isinstance(node, _Inode):
            raise IsADirectoryError(21, "Is a directory", path)
        return node

    def _handle(self, inode: _Inode) -> int:
        self._next += 1
        self._handles[self._next] = inode
        return self._next

    # --- FileSystem ---------------------------------------------------------------------

    def open(self, path: str, mode: str) -> int:
        with self._lock:
            self._step()
            entries, name = self._parent(path)
            node = entries.get(name)
            if node is not None and mode == "create":
                raise FileExistsError(17, "File exists", path)
            if node is None:
                node = entries[name] = _Inode()
            assert isinstance(node, _Inode)
            return self._handle(node)

    def write(self, handle: int, data: bytes) -> None:
        with self._lock:
            self._step()
            self._handles[handle].data += data

    def write_at(self, handle: int, data: bytes, offset: int) -> None:
        with self._lock:
            self._step()
            content = self._handles[handle].data
            if len(content) < offset:
                content += bytes(offset - len(content))
            content[offset : offset + len(data)] = data

    def read_at(self, handle: int, size: int, offset: int) -> bytes:
        with self._lock:
            if self.crashed:
                raise PowerLoss("simulated power loss")
            return bytes(self._handles[handle].data[offset : offset + size])

    def fsync(self, handle: int) -> None:
        with self._lock:
            self._step()
            inode = self._handles[handle]
            inode.synced = bytes(inode.data)

    def sync_data(self, handle: int) -> None:
        self.fsync(handle)  # fdatasync keeps the data and the size: all this disk models

    def truncate(self, handle: int, size: int) -> None:
        with self._lock:
            self._step()
            del self._handles[handle].data[size:]

    def close(self, handle: int) -> None:
        with self._lock:
            self._handles.pop(handle, None)

    def read(self, path: str) -> bytes:
        with self._lock:
            if self.crashed:
                raise PowerLoss("simulated power loss")
            return bytes(self._inode(path).data)

    def size(self, path: str) -> int:
        with self._lock:
            return len(self._inode(path).data)

    def exists(self, path: str) -> bool:
        with self._lock:
            try:
                entries, name = self._parent(path)
            except FileNotFoundError:
                return False
            return name in entries or path in self.dirs

    def is_dir(self, path: str) -> bool:
        with self._lock:
            return path in self.dirs

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            return sorted(self.dirs.get(path, {}))

    def mkdir(self, path: str) -> bool:
        with self._lock:
            if path in self.dirs:
                return False
            self._step()
            entries, name = self._parent(path)
            entries[name] = _DIR
            self.dirs[path] = {}
            self.synced_dirs[path] = {}
            return True

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            self._step()
            src_entries, src_name = self._parent(src)
            dst_entries, dst_name = self._parent(dst)
            node = src_entries.pop(src_name)
            dst_entries[dst_name] = node
            if node == _DIR:
                for old in [d for d in self.dirs if d == src or d.startswith(src + "/")]:
                    new = dst + old[len(src) :]
                    self.dirs[new] = self.dirs.pop(old)
                    self.synced_dirs[new] = self.synced_dirs.pop(old, {})

    def link(self, src: str, dst: str) -> bool:
        with self._lock:
            self._step()
            node = self._inode(src)
            entries, name = self._parent(dst)
            if name in entries:
                return False
            entries[name] = node
            return True

    def unlink(self, path: str) -> None:
        with self._lock:
            self._step()
            entries, name = self._parent(path)
            entries.pop(name, None)

    def rmdir(self, path: str) -> None:
        with self._lock:
            self._step()
            entries, name = self._parent(path)
            entries.pop(name, None)
            self.dirs.pop(path, None)

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            self._step()
            self.synced_dirs[path] = dict(self.dirs[path])

    def try_lock(self, path: str) -> int | None:
        with self._lock:
            if path in self._locks.values():
                return None
            self._next += 1
            self._locks[self._next] = path
            return self._next

    def lock(self, path: str) -> int:
        handle = self.try_lock(path)
        assert handle is not None, "the power-loss workload never contends for a lock"
        return handle

    def unlock(self, handle: int) -> None:
        with self._lock:
            self._locks.pop(handle, None)
