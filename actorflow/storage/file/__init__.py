"""The file store: runs in a local folder, by composition (see :mod:`._store`)."""

from __future__ import annotations

from actorflow.storage.file._fs import FileSystem, OSFileSystem
from actorflow.storage.file._store import FileStore

__all__ = ["FileStore", "FileSystem", "OSFileSystem"]
