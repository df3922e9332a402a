"""The PostgreSQL store: runs in tables of a PostgreSQL database (see :mod:`._store`).

psycopg is imported only when this package is (``actorflow.storage`` exports
``PostgresStore`` lazily): ``pip install 'actorflow[postgres]'``.
"""

from __future__ import annotations

try:
    import psycopg  # noqa: F401  (only to say what is missing)
except ModuleNotFoundError as exc:  # the core install has no psycopg
    from actorflow.errors import StoreUnavailableError

    raise StoreUnavailableError(
        "open", "PostgresStore needs psycopg 3: pip install 'actorflow[postgres]'"
    ) from exc

from actorflow.storage.postgres._store import PostgresStore

__all__ = ["PostgresStore"]
