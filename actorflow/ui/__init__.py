"""The inspector: ``actorflow ui``, a local web app over a store (the ``ui`` extra).

:func:`create_app` is an ASGI app (Starlette) to serve or to mount in your own
server; :func:`serve` runs it on uvicorn under asyncio, or on hypercorn under
trio. It reads runs through the library's readers and never takes a claim;
its actions go through the same public calls a program makes. See
``docs/inspector.md``.
"""

from __future__ import annotations

from actorflow.ui._app import create_app
from actorflow.ui._security import is_loopback
from actorflow.ui._serve import bind, serve

__all__ = ["bind", "create_app", "is_loopback", "serve"]
