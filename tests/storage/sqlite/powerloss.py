"""Power loss replayed from an ``strace`` log: the disk as it comes back at any crash point.

SQLite does its file I/O in C, so no Python file system can sit under it
the way ``SimFS`` sits under the FileStore. Instead the workload runs once
under ``strace -f`` (:func:`run_traced`), which logs every open, write,
truncate, sync, unlink and rename the process makes, and every line it
writes to stdout, in the order they completed. :class:`Trace` reads that log
for the files of one folder, following each descriptor to the file it was
opened on (so a file unlinked and made again is a new file), and replays it
on a model disk that forgets what was not synced: a file's contents become
durable with ``fsync``/``fdatasync`` of that file, the folder's entries
(files created, unlinked, renamed) with a sync of the folder, as on ext4 and
XFS. The process's acknowledgements are its stdout lines starting ``ACK``.

Crash point ``k`` means the first ``k`` events happened and no later one:
:meth:`Trace.crash_points` gives the files as they come back then, and the
acknowledgements made before. Without tearing only the synced state survives,
which changes only at a sync, so :meth:`Trace.last_points` (the point before
each sync, and the end) covers every crash point: there the most was
acknowledged of all points with that disk. With ``tear`` each write not yet
synced independently reached the disk or not, one that did maybe only in its
first sectors (writes reordered and cut), and each folder change not yet
synced independently survived or not, as ``SimFS`` tears.

One traced process only: descriptors are followed in one table.
"""

from __future__ import annotations

import functools
import os
import random
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from pathlib import Path

__all__ = ["CrashPoint", "Trace", "run_traced", "strace", "write_image"]

TRACED = (
    "openat,open,creat,close,dup,dup2,dup3,write,pwrite64,writev,pwritev,pwritev2,"
    "fsync,fdatasync,ftruncate,truncate,unlink,unlinkat,rename,renameat,renameat2"
)
"""The system calls replayed: every way the process changes a file, syncs one, or names one."""

SECTOR = 512
"""A torn write reaches the disk in whole sectors, from its start."""


@functools.cache
def strace() -> str | None:
    """The ``strace`` executable, if installed and allowed to trace here."""
    found = shutil.which("strace")
    if found is None:
        return None
    try:
        probe = subprocess.run(
            [found, "-f", "-e", "trace=write", "-o", os.devnull, "true"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found if probe.returncode == 0 else None


def run_traced(argv: Sequence[str], log: Path, *, cwd: Path, timeout: float) -> str:
    """Run ``argv`` under ``strace -f``, logging to ``log``; its stdout.

    The process and strace are one process group, all killed past ``timeout``.

    Raises:
        AssertionError: strace is missing, or the process failed or timed out
            (with its stderr).
    """
    tracer = strace()
    assert tracer is not None, "strace is not installed, or may not trace here"
    command = [tracer, "-f", "--seccomp-bpf", "-e", f"trace={TRACED}", "-xx", "-s", "100000000"]
    command += ["-o", str(log), *argv]
    child = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        raise AssertionError(f"the traced workload ran past {timeout} s: {err.decode()}") from None
    assert child.returncode == 0, f"the traced workload failed: {err.decode()}"
    return out.decode()


# --- reading the log -------------------------------------------------------------

_CALL = re.compile(r"^(\w+)\((.*)\)\s+= (-?\d+|\?)")
_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_STRING = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')


@dataclass(frozen=True)
class Call:
    """One completed system call: its name, its arguments as strace wrote them, its result."""

    name: str
    args: list[str]
    result: int | None  # None: unknown (the process ended inside it)


def _split(args: str) -> list[str]:
    """Top-level arguments (``-xx`` escapes every byte of a string, so none holds a comma)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(args):
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    parts.append(args[start:].strip())
    return parts


def calls(text: str) -> Iterator[Call]:
    """The log's calls in the order they completed; a call another thread interrupted is joined."""
    pending: dict[str, str] = {}
    for line in text.splitlines():
        tid, _, rest = line.partition(" ")
        rest = rest.lstrip()
        if rest.endswith(_UNFINISHED):
            pending[tid] = rest[: -len(_UNFINISHED)]
            continue
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            rest = pending.pop(tid) + resumed.group(2)
        found = _CALL.match(rest)
        if found is None:  # +++ exited +++, --- signals ---
            continue
        name, args, result = found.groups()
        yield Call(name, _split(args), None if result == "?" else int(result))


def string(arg: str) -> bytes:
    """The bytes of a string argument (``-xx``: every byte escaped)."""
    found = _STRING.fullmatch(arg)
    assert found is not None, f"not a whole string (strace cut it?): {arg[:80]}"
    return bytes.fromhex(found.group(1).replace("\\x", ""))


def _iovec(arg: str) -> bytes:
    return b"".join(string(f'"{s}"') for s in re.findall(r'iov_base="([^"]*)"', arg))


# --- the model disk ----------------------------------------------------------------


@dataclass(frozen=True)
class _Write:
    file: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class _Truncate:
    file: int
    size: int


@dataclass(frozen=True)
class _Sync:
    file: int


@dataclass(frozen=True)
class _Name:
    """The folder's entry ``name`` now names ``file`` (``None``: removed)."""

    name: str
    file: int | None


@dataclass(frozen=True)
class _SyncFolder:
    pass


@dataclass(frozen=True)
class _Ack:
    line: str


_Event = _Write | _Truncate | _Sync | _Name | _SyncFolder | _Ack


@dataclass
class _File:
    data: bytearray
    synced: bytes
    pending: list[_Write | _Truncate] = field(default_factory=list)


@dataclass(frozen=True)
class CrashPoint:
    """The disk after a power loss at one crash point, and what was acknowledged before it."""

    index: int
    files: dict[str, bytes]
    """The folder's files as they come back: name to contents."""
    acks: list[str]
    """The acknowledgement lines written before the crash, without ``ACK``."""


_FOLDER = -1


class Trace:
    """The events of one traced run on the files of ``folder``.

    Args:
        text: the strace log.
        folder: the absolute path of the folder whose files are modelled
            (files in folders below it are not).
        before: its files before the run (durable), name to contents.
        cwd: the process's working folder, for relative paths.
    """

    def __init__(
        self, text: str, folder: str, *, before: dict[str, bytes] | None = None, cwd: str = "/"
    ) -> None:
        self.folder = os.path.normpath(folder)
        self.cwd = cwd
        self.before = dict(before or {})
        self.events: list[_Event] = []
        self._next = 0
        self._names: dict[str, int] = {}
        self._initial: dict[int, bytes] = {}
        for name, data in self.before.items():
            self._names[name] = self._new_file()
            self._initial[self._names[name]] = data
        self._names_before = dict(self._names)
        self._fds: dict[int, tuple[str, int | None]] = {}  # fd: (path, file or folder)
        for call in calls(text):
            if call.result is not None and call.result >= 0:
                self._take(call)

    def _new_file(self) -> int:
        self._next += 1
        return self._next

    def _path(self, dirfd: str, path: str) -> str:
        if os.path.isabs(path):
            return os.path.normpath(path)
        base = self.cwd if dirfd == "AT_FDCWD" else self._fds[int(dirfd)][0]
        return os.path.normpath(os.path.join(base, path))

    def _name(self, path: str) -> str | None:
        """The entry's name if ``path`` is a file right in the folder."""
        parent, name = os.path.split(path)
        return name if parent == self.folder else None

    def _opened(self, fd: int, path: str, flags: str) -> None:
        target: int | None = None
        if path == self.folder:
            target = _FOLDER
        elif (name := self._name(path)) is not None:
            target = self._names.get(name)
            if target is None and "O_CREAT" in flags:
                target = self._names[name] = self._new_file()
                self.events.append(_Name(name, target))
            if target is not None and "O_TRUNC" in flags:
                self.events.append(_Truncate(target, 0))
        self._fds[fd] = (path, target)

    def _file(self, fd: str) -> int | None:
        found = self._fds.get(int(fd))
        return None if found is None else found[1]

    def _take(self, call: Call) -> None:
        a, result = call.args, call.result
        assert result is not None
        if call.name in ("open", "openat", "creat"):
            self._open(call.name, a, result)
        elif call.name == "close":
            self._fds.pop(int(a[0]), None)
        elif call.name in ("dup", "dup2", "dup3"):
            if int(a[0]) in self._fds:
                self._fds[result] = self._fds[int(a[0])]
        elif call.name in ("write", "writev", "pwrite64", "pwritev", "pwritev2"):
            self._write(call.name, a, result)
        elif call.name in ("fsync", "fdatasync"):
            target = self._file(a[0])
            if target == _FOLDER:
                self.events.append(_SyncFolder())
            elif target is not None:
                self.events.append(_Sync(target))
        elif call.name in ("ftruncate", "truncate"):
            if call.name == "ftruncate":
                target = self._file(a[0])
            else:
                name = self._name(self._at("AT_FDCWD", a[0]))
                target = None if name is None else self._names.get(name)
            if target is not None and target != _FOLDER:
                self.events.append(_Truncate(target, int(a[1])))
        elif call.name in ("unlink", "unlinkat"):
            path = self._at("AT_FDCWD", a[0]) if call.name == "unlink" else self._at(*a[:2])
            name = self._name(path)
            if name is not None and self._names.pop(name, None) is not None:
                self.events.append(_Name(name, None))
        elif call.name == "rename":
            self._rename(self._at("AT_FDCWD", a[0]), self._at("AT_FDCWD", a[1]))
        elif call.name in ("renameat", "renameat2"):
            self._rename(self._at(*a[:2]), self._at(*a[2:4]))

    def _at(self, dirfd: str, arg: str) -> str:
        """The path a string argument names, relative to ``dirfd``."""
        return self._path(dirfd, string(arg).decode())

    def _open(self, name: str, a: list[str], fd: int) -> None:
        if name == "openat":
            path, flags = self._at(*a[:2]), a[2]
        else:
            path = self._at("AT_FDCWD", a[0])
            flags = a[1] if name == "open" else "O_CREAT|O_TRUNC"
        self._opened(fd, path, flags)

    def _write(self, name: str, a: list[str], written: int) -> None:
        if name == "write" and a[0] == "1":
            data = string(a[1])
            if data.startswith(b"ACK "):
                self.events.append(_Ack(data[4:].decode().strip()))
            return
        target = self._file(a[0])
        if target is None or target == _FOLDER:
            return
        assert name.startswith("pwrite"), f"{name} at the file's position (not modelled)"
        data = string(a[1]) if name == "pwrite64" else _iovec(a[1])
        self.events.append(_Write(target, int(a[3]), data[:written]))

    def _rename(self, src: str, dst: str) -> None:
        old, new = self._name(src), self._name(dst)
        moved = None if old is None else self._names.pop(old, None)
        if moved is not None and old is not None:
            self.events.append(_Name(old, None))
        if new is not None:
            if moved is None:
                self._names.pop(new, None)  # replaced by a file from outside the folder
            else:
                self._names[new] = moved
            self.events.append(_Name(new, moved))

    @property
    def acks(self) -> list[str]:
        """Every acknowledgement of the run, in order."""
        return [e.line for e in self.events if isinstance(e, _Ack)]

    def last_points(self) -> list[int]:
        """The last crash point before each sync, and the end: the synced disk differs
        between them, and the acknowledgements only grow."""
        syncs = [k for k, e in enumerate(self.events) if isinstance(e, _Sync | _SyncFolder)]
        return [*syncs, len(self.events)]

    def crash_points(
        self, points: Iterable[int], *, tear: bool = False, seed: int = 0
    ) -> Iterator[CrashPoint]:
        """The disk after a power loss at each of ``points``, in ascending order; torn if
        ``tear`` (seeded by ``seed`` and the point)."""
        files = {f: _File(bytearray(d), d) for f, d in self._initial.items()}
        names = dict(self._names_before)
        synced_names = dict(names)
        acks: list[str] = []
        done = 0
        for k in sorted(set(points)):
            assert 0 <= k <= len(self.events), k
            for event in self.events[done:k]:
                if isinstance(event, _Ack):
                    acks.append(event.line)
                elif isinstance(event, _Name):
                    if event.file is None:
                        names.pop(event.name, None)
                    else:
                        names[event.name] = event.file
                        files.setdefault(event.file, _File(bytearray(), b""))
                elif isinstance(event, _SyncFolder):
                    synced_names = dict(names)
                elif isinstance(event, _Sync):
                    file = files[event.file]
                    file.synced, file.pending = bytes(file.data), []
                else:
                    file = files[event.file]
                    _apply(file.data, event)
                    file.pending.append(event)
            done = k
            rng = random.Random(seed * 1_000_003 + k)
            yield CrashPoint(k, self._disk(files, names, synced_names, tear, rng), list(acks))

    @staticmethod
    def _disk(
        files: dict[int, _File],
        names: dict[str, int],
        synced_names: dict[str, int],
        tear: bool,
        rng: random.Random,
    ) -> dict[str, bytes]:
        kept = dict(synced_names)
        if tear:  # each folder change not synced survived or not
            for name in sorted(set(names) | set(synced_names)):
                if names.get(name) != synced_names.get(name) and rng.random() < 0.5:
                    if name in names:
                        kept[name] = names[name]
                    else:
                        kept.pop(name, None)
        disk: dict[str, bytes] = {}
        for name, number in sorted(kept.items()):
            file = files[number]
            if not tear:
                disk[name] = file.synced
                continue
            data = bytearray(file.synced)
            for change in file.pending:  # each reached the disk or not, a write maybe cut
                if rng.random() < 0.5:
                    continue
                if isinstance(change, _Write) and rng.random() < 0.25:
                    first = -change.offset % SECTOR
                    cuts = [0, *range(first, len(change.data), SECTOR), len(change.data)]
                    change = _Write(change.file, change.offset, change.data[: rng.choice(cuts)])
                _apply(data, change)
            disk[name] = bytes(data)
        return disk


def _apply(data: bytearray, change: _Write | _Truncate) -> None:
    if isinstance(change, _Truncate):
        if change.size < len(data):
            del data[change.size :]
        else:
            data.extend(bytes(change.size - len(data)))
        return
    end = change.offset + len(change.data)
    if len(data) < change.offset:
        data.extend(bytes(change.offset - len(data)))
    data[change.offset : end] = change.data


def write_image(files: dict[str, bytes], folder: Path, *, drop: Sequence[str] = ()) -> None:
    """Write a crash point's files into ``folder`` (emptied first), leaving out names
    ending in any of ``drop``."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in files.items():
        if not name.endswith(tuple(drop)):
            (folder / name).write_bytes(data)
