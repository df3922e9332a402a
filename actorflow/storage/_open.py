"""Open a store from a location string: a folder path or ``s3://bucket/prefix``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from actorflow.storage._sealing import Codec

if TYPE_CHECKING:
    from actorflow.storage._protocol import Store

__all__ = ["open_store"]


def open_store(location: str | os.PathLike[str], **options: Any) -> Store:
    """A store for ``location``: ``s3://bucket/prefix`` is an ``S3Store``, anything else a folder.

    For S3, ``AWS_ENDPOINT_URL`` (or ``ACTORFLOW_S3_ENDPOINT``) points at a
    non-AWS server; ``options`` go to the store's constructor. Without a
    ``codec`` option, the store is encrypted with the keys ``ACTORFLOW_KEYS``
    or ``ACTORFLOW_KEY_FILE`` name, if any (see :meth:`Codec.from_env`).

    Raises:
        ConfigurationError: those variables hold something unusable.
    """
    text = os.fspath(location)
    if "codec" not in options:
        codec = Codec.from_env()
        if codec.encrypted:
            options["codec"] = codec
    if text.startswith("s3://"):
        from actorflow.storage.s3 import S3Store

        bucket, _, prefix = text[5:].partition("/")
        endpoint = os.environ.get("ACTORFLOW_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in options:
            options["endpoint_url"] = endpoint
        return S3Store(bucket, prefix, **options)
    if text.startswith("memory://"):
        from actorflow.storage._memory import MemoryStore

        return MemoryStore(**options)
    from actorflow.storage.file import FileStore

    return FileStore(text, **options)
