"""The S3 store: runs as objects in a bucket, by composition (see :mod:`._store`).

aioboto3 is imported only when a store is made.
"""

from __future__ import annotations

from actorflow.storage.s3._store import S3Store

__all__ = ["S3Store"]
