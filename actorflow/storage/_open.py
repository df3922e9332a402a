"""Open a store from a location string: a folder path or a URL whose scheme names the store."""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import TYPE_CHECKING, Any

from actorflow.storage._sealing import Codec

if TYPE_CHECKING:
    from actorflow.storage._protocol import Store

__all__ = ["STORE_SCHEMES", "open_store", "printable_location"]

STORE_SCHEMES = ("file", "s3", "memory", "sqlite", "postgresql", "postgres")
"""The URL schemes ``open_store`` knows; any other ``scheme://`` is refused, never a folder."""

# A Windows drive ("C:\\") is one letter: two or more before "://" is a URL scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def open_store(location: str | os.PathLike[str], **options: Any) -> Store:
    """A store for ``location``: a folder path, or a URL naming the store.

    ``s3://bucket/prefix`` is an ``S3Store``, ``sqlite:///path/to/file.db`` a
    ``SqliteStore``, ``postgresql://…`` (or ``postgres://…``) a
    ``PostgresStore``, ``memory://`` a ``MemoryStore``; a location with no
    scheme, or ``file:///path``, is a folder for the ``FileStore``.

    For S3, ``AWS_ENDPOINT_URL`` (or ``ACTORFLOW_S3_ENDPOINT``) points at a
    non-AWS server; ``options`` go to the store's constructor. Without a
    ``codec`` option, the store is encrypted with the keys ``ACTORFLOW_KEYS``
    or ``ACTORFLOW_KEY_FILE`` name, if any (see :meth:`Codec.from_env`).

    Raises:
        ConfigurationError: those variables hold something unusable, or the
            location has a scheme this actorflow does not know.
    """
    text = os.fspath(location)
    match = _SCHEME.match(text)
    scheme = match.group(1).lower() if match else None
    if scheme is not None and scheme not in STORE_SCHEMES:
        from actorflow.errors import ConfigurationError

        raise ConfigurationError(
            "store location",
            printable_location(text),
            "a folder path or a URL with one of the schemes "
            + ", ".join(f"{known}://" for known in STORE_SCHEMES),
        )
    if "codec" not in options:
        codec = Codec.from_env()
        if codec.encrypted:
            options["codec"] = codec
    if scheme == "sqlite":
        from actorflow.storage.sqlite import SqliteStore

        return SqliteStore.from_url(text, **options)
    if scheme in ("postgresql", "postgres"):
        from actorflow.storage.postgres import PostgresStore

        return PostgresStore(text, **options)
    if scheme == "s3":
        from actorflow.storage.s3 import S3Store

        bucket, _, prefix = text[5:].partition("/")
        endpoint = os.environ.get("ACTORFLOW_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in options:
            options["endpoint_url"] = endpoint
        return S3Store(bucket, prefix, **options)
    if scheme == "memory":
        from actorflow.storage._memory import MemoryStore

        return MemoryStore(**options)
    from actorflow.storage.file import FileStore

    if scheme == "file":
        return FileStore(_file_url_path(text), **options)
    return FileStore(text, **options)


def _file_url_path(url: str) -> str:
    """The folder a ``file://`` URL names: ``file:///srv/runs`` or ``file://localhost/srv/runs``.

    Raises:
        ConfigurationError: it names another host, or no path.
    """
    from urllib.parse import unquote, urlsplit

    from actorflow.errors import ConfigurationError

    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or not parts.path:
        raise ConfigurationError(
            "store location", url, "file:///absolute/path (a folder on this machine)"
        )
    return unquote(parts.path)


def printable_location(spec: str) -> str:
    """A store's location as printed: a URL's password left out (output ends up in logs).

    Both places libpq reads one from go: the user part (``user:secret@host``)
    and a ``password`` parameter; the rest stays as written. The server then
    takes it from ``PGPASSWORD`` or ``~/.pgpass``, as for any libpq program.
    """
    if "://" not in spec:
        return spec
    parts = urllib.parse.urlsplit(spec)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user = credentials.partition(":")[0]
        netloc = f"{user}@{host}" if user else host
    query = "&".join(
        p for p in parts.query.split("&") if urllib.parse.unquote(p.partition("=")[0]) != "password"
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))
