"""Housekeeping after ``prune``: what crashed writes and deletes left in a file store.

A process killed while writing leaves its temp file (``.tmp-*``, see
:func:`~actorflow.storage.file._fs.write_atomic`); one killed while deleting a run
leaves a ``.trash-*`` folder. Neither is ever read, so ``prune`` removes them:
trash at once (nobody writes into it), temp files once they are older than any
write could take. Every function blocks: the store calls them from a worker thread.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from actorflow._log import get_logger
from actorflow.storage.file._fs import TEMP_PREFIX, TRASH_PREFIX

if TYPE_CHECKING:
    from actorflow.storage.file._fs import FileSystem
    from actorflow.storage.file._layout import RunFolders

__all__ = ["TEMP_MAX_AGE", "sweep"]

_log = get_logger(__name__)

TEMP_MAX_AGE: Final = 3600.0
"""Seconds after which a temp file is a crashed writer's: a live write renames it in far less."""

_TEMP_FOLDERS: Final = ("", "blobs", "snapshots", "inbox")
"""Where a run's temp files are written: beside its manifest and owner, blobs, snapshots, inbox."""


def sweep(folders: RunFolders, now: float) -> int:
    """Remove leftover trash and stale temp files under ``folders``; return the bytes freed.

    Never follows a link, and a file it cannot remove is reported
    (``sweep_failed``) and left: housekeeping never fails a ``prune``.
    """
    fs, root = folders.fs, folders.root
    freed = 0
    for name in fs.listdir(root):
        path = os.path.join(root, name)
        if name.startswith(TRASH_PREFIX):
            freed += _remove(fs, path, tree=True)
        elif name.startswith(TEMP_PREFIX):
            freed += _remove_stale(fs, path, now)
        elif not name.startswith(".") and fs.is_dir(path):
            for sub in _TEMP_FOLDERS:
                folder = os.path.join(path, sub) if sub else path
                for entry in fs.listdir(folder) if fs.is_dir(folder) else ():
                    if entry.startswith(TEMP_PREFIX):
                        freed += _remove_stale(fs, os.path.join(folder, entry), now)
    return freed


def _remove_stale(fs: FileSystem, path: str, now: float) -> int:
    try:
        if now - fs.modified(path) <= TEMP_MAX_AGE:
            return 0  # perhaps a live write: it renames its temp file in well under this
    except FileNotFoundError:
        return 0  # renamed into place meanwhile
    return _remove(fs, path, tree=False)


def _remove(fs: FileSystem, path: str, *, tree: bool) -> int:
    try:
        size = _size(fs, path)
        if tree:
            fs.remove_tree(path)
        else:
            fs.unlink(path)
    except OSError as exc:
        _log.warning(
            "sweep_failed",
            location=path,
            error=str(exc),
            problem="left in place; remove it by hand if it stays",
        )
        return 0
    _log.info("leftover_removed", location=path, bytes=size)
    return size


def _size(fs: FileSystem, path: str) -> int:
    if not fs.is_dir(path):  # a file, or a link: never followed
        try:
            return fs.size(path)
        except FileNotFoundError:
            return 0
    return sum(_size(fs, os.path.join(path, n)) for n in fs.listdir(path))
