"""Reading a file whose bytes actorflow trusts to nothing: regular files only, bounded.

Everything a file store reads (manifests, log segments, snapshots, blobs,
inbox entries), key files, history files (``actorflow replay --history``) and
the files the command line is given (``--file``, ``--edit``) go through
:func:`read_regular_file`, so that a FIFO, a device or a folder put where a
file should be is named instead of read: a FIFO would block the read for
ever, ``/dev/zero`` would fill memory.
"""

from __future__ import annotations

import os
import stat

from actorflow.errors import UnreadableFileError

__all__ = ["read_regular_file"]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular_file(path: str, *, limit: int) -> bytes:
    """The whole of the regular file at ``path`` (a link is followed). Blocks.

    Opened without blocking (a FIFO's open would wait for a writer) and
    checked before a byte is read: only a regular file of at most ``limit``
    bytes is read, and only as many bytes as it had then, so a device like
    ``/dev/zero`` or a file growing meanwhile never makes a read go on.

    Raises:
        FileNotFoundError: nothing is there.
        UnreadableFileError: a folder, FIFO, device or socket, or over ``limit`` bytes.
        OSError: the operating system refused otherwise.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "no regular file")
            raise UnreadableFileError(path, f"{kind}, not a regular file")
        if info.st_size > limit:
            raise UnreadableFileError(
                path, f"{info.st_size} bytes, over the {limit} bytes actorflow reads of a file"
            )
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:  # cut short meanwhile: what is there is checked like any file
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
