"""SqliteStore: every run in one SQLite file (stdlib ``sqlite3``), for one machine."""

from actorflow.storage.sqlite._store import SqliteStore

__all__ = ["SqliteStore"]
