"""Serving the inspector: a socket bound first, then uvicorn (asyncio) or hypercorn (trio).

The socket is bound before the server starts so that the URL printed names the
port really listened on (``--port 0`` picks a free one), and so that a port in
use is an error before anything else happens.
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import TYPE_CHECKING, Final

import anyio
import sniffio

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp

__all__ = ["bind", "serve"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: a free one).

    Raises:
        OSError: the address cannot be bound (in use, not this machine's).
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve(app: ASGIApp, sock: socket.socket) -> None:
    """Serve ``app`` on the bound, listening ``sock`` until cancelled, on the running loop.

    asyncio: uvicorn; trio: hypercorn. Connections made before the server
    takes the socket wait in its backlog, so its URL may be given out at once.
    """
    if sniffio.current_async_library() == "trio":
        await _serve_trio(app, sock)
    else:
        await _serve_asyncio(app, sock)


_GRACE: Final = 1.0
"""Seconds open connections (a live page's event stream) get to end when the server stops."""


async def _until_cancelled(
    stop: Callable[[], None], served: anyio.Event, serving: anyio.CancelScope
) -> None:
    """Wait until cancelled; then ask the server to stop, and wait (shielded) until it has.

    A server that has not stopped in a few seconds more is cancelled where it is.
    """
    try:
        await served.wait()
    finally:
        stop()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_GRACE + 4):
            await served.wait()
        serving.cancel()


async def _serve_asyncio(app: ASGIApp, sock: socket.socket) -> None:
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=int(_GRACE),
    )
    server = uvicorn.Server(config)
    # Ctrl-C is the caller's (the command cancels this task): uvicorn must not take the signals
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    served = anyio.Event()
    serving = anyio.CancelScope(shield=True)  # it stops when told, closing what it opened

    async def run() -> None:
        try:
            with serving:
                await server.serve(sockets=[sock])
        finally:
            served.set()

    def stop() -> None:
        server.should_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await _until_cancelled(stop, served, serving)


async def _serve_trio(app: ASGIApp, sock: socket.socket) -> None:
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    # hypercorn closes the socket it is given: its own copy, the caller closes the original
    config.bind = [f"fd://{os.dup(sock.fileno())}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = _GRACE
    stopping = trio.Event()
    served = anyio.Event()
    serving = anyio.CancelScope(shield=True)

    async def run() -> None:
        try:
            with serving:
                await hypercorn_serve(app, config, shutdown_trigger=stopping.wait)  # type: ignore[arg-type]
        finally:
            served.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await _until_cancelled(stopping.set, served, serving)
